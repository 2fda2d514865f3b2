/// The API's and the configuration's share of the hostile corpus: requests, config files and flags whose every
/// number or shape once could (or still might) trap, each with the clear error it must get instead.
extension HostileCorpus {
    /// API requests with the answer code each must get, against a daemon that knows the online device `plug1`.
    /// Sent with an MQTT 5 response topic, so that even a payload that is not JSON gets its 400.
    static let apiRequests: [(method: String, payload: String, code: Int)] = [
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":-1e300,"force":true}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":1e300}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":1e10}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":0}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":-0.0}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":"5"}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":[1]}"#, 400),
        ("set", #"{"device":"zz1","data":{"switch_1":true},"timeout":1e400}"#, 400),
        ("set", #"{"device":"zz1","data":[]}"#, 400),
        ("set", #"{"device":"zz1","data":{}}"#, 400),
        ("set", #"{"device":"bad id","data":{"a":1}}"#, 400),
        ("set", #"{"device":12,"data":{"a":1}}"#, 400),
        ("devices", #"{"limit":0}"#, 400),
        ("devices", #"{"limit":-1}"#, 400),
        ("devices", #"{"limit":1.5}"#, 400),
        ("devices", #"{"limit":1e300}"#, 400),
        ("devices", #"{"limit":99999999999999999999}"#, 400),
        ("devices", #"{"limit":"10"}"#, 400),
        ("devices", #"{"after":5}"#, 400),
        ("devices", #"{"after":"zzzz","limit":1}"#, 0),
        ("devices", #"{"offline":"yes","gateway":17}"#, 0),
        ("info", #"{"device":"ghost"}"#, 404),
        ("info", #"{"device":"\u001b[2J"}"#, 400),
        ("info", #"{"device":null}"#, 400),
        ("info", #"{}"#, 400),
        ("edit", #"{"device":"plug1","name":5}"#, 400),
        ("edit", #"{"device":"plug1","offlineWarning":"no"}"#, 400),
        ("remove", #"{"device":"ghost"}"#, 404),
        ("detail", #"{"device":"ghost"}"#, 404),
        ("nosuchmethod", #"{"device":"plug1"}"#, 404),
        ("info", #"[]"#, 400),
        ("info", #"null"#, 400),
        ("info", #"{"device":"plug1""#, 400),
        ("info", "\u{FF}\u{FE}", 400),
        ("info", #"{"device":"plug1","pad":""# + String(repeating: "x", count: 300_000) + #""}"#, 400),
        ("devices", String(repeating: "[", count: 100_000), 400),
    ]

    /// Config files, each with the key its error must name.
    static let configFiles: [(text: String, key: String)] = [
        (#"{"keepAlive":1e300}"#, "keepAlive"),
        (#"{"keepAlive":70000}"#, "keepAlive"),
        (#"{"sessionExpiry":1e20}"#, "sessionExpiry"),
        (#"{"requestTimeout":1e300}"#, "requestTimeout"),
        (#"{"offlineGracePeriod":1e300}"#, "offlineGracePeriod"),
        (#"{"transferStallTimeout":1e19}"#, "transferStallTimeout"),
        (#"{"reconnectMaxDelay":1e300}"#, "reconnectMaxDelay"),
        (#"{"flushInterval":-1}"#, "flushInterval"),
        (#"{"maxInFlight":0}"#, "maxInFlight"),
        (#"{"maxClockSkew":1e300}"#, "maxClockSkew"),
        (#"{"maxPropertiesPerDevice":-5}"#, "maxPropertiesPerDevice"),
        (#"{"maxDevices":1e300}"#, "maxDevices"),
        (#"{"apiPageSize":0}"#, "apiPageSize"),
        (#"{"apiRateLimit":-1}"#, "apiRateLimit"),
        (#"{"apiRateLimitTotal":1e300}"#, "apiRateLimitTotal"),
        (##"{"replyPrefix":"#"}"##, "replyPrefix"),
    ]

    /// Command lines whose seconds would trap where they become a `Duration`.
    static let flags: [[String]] = [
        ["set", "zz1", "switch_1=true", "--timeout", "1e300"],
        ["set", "zz1", "switch_1=true", "--timeout", "inf"],
        ["info", "zz1", "--fetch", "--timeout", "1e300"],
        ["info", "zz1", "--fetch", "--timeout", "nan"],
        ["transfer", "gwNew", "--from", "gwOld", "--timeout", "1e300"],
        ["wifi-scan", "zz1", "--timeout", "1e20"],
        ["simulate", "--devices", "1", "--ramp", "1e300"],
    ]
}
