import Foundation
import TestSupport
import ThingAgent

/// The messages of the hostile-input test: a corpus whose every message has a known outcome, and a seeded
/// generator of random and mutated ones (docs/protocol.md's examples, bent) whose outcome is not known in advance.
enum HostileCorpus {
    /// docs/protocol.md's rule for a device id.
    static func isValidDeviceID(_ id: String) -> Bool {
        (1...64).contains(id.utf8.count) && id.unicodeScalars.allSatisfy {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".:_-".unicodeScalars.contains($0))
        }
    }

    /// A full, valid state for a device (every kind it can report).
    static func baseline(_ id: String) -> [(suffix: String, payload: String)] {
        [
            ("info", """
                {"msgId":"7","time":\(t0),"data":{"devId":"\(id)","name":"Hall light","productId":"p-light-1",
                "category":"device","ip":"203.0.113.7","lanIp":"192.168.1.23","mac":"a4:c1:38:00:11:22",
                "timezone":"+08:00","netStrength":"76%","wifiSignal":-58,"iccid":null,"rsrp":null,"channel":null,
                "vendorName":null,"homekitCode":null,"connectAbility":"gateway","gatewayId":"gw01","spaceId":1001,
                "firmwareVersion":"1.4.2","abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}}
                """),
            ("status", #"{"time":\#(t0),"status":"online"}"#),
            ("properties", """
                {"msgId":"45lkj3551234","time":\(t0),"data":{"switch_1":{"value":true,"time":\(t0)},
                "bright_value":{"value":800,"time":\(t0)},"mode":"white","label":"ok"}}
                """),
            ("signal", #"{"time":\#(t0 + 5),"wifiSignal":-61,"rsrp":-97}"#),
            ("gateway/transfer/status", """
                {"msgId":"91","time":\(t0),"data":{"targetDeviceId":"gwOld","targetDeviceName":"Old gateway",
                "sourceDeviceId":"\(id)","status":2,"failedCode":""}}
                """),
        ]
    }

    /// Device ids that libmosquitto refuses to put in a topic (MQTT forbids control characters).
    static let controlCharacterIDs = ["a\u{01}b", "a\tb", "a\u{7F}b", "a\u{85}b", "\u{1B}[31mred"]

    /// Device ids that break docs/protocol.md's rule yet make a valid MQTT topic level (`+`, `#` and `/` cannot:
    /// they are wildcards or level separators).
    static let invalidIDs = [
        "bad id", " ", String(repeating: "a", count: 65), String(repeating: "x", count: 1000), "dév", "😀", "", "$SYS",
        "a*b", "a,b", "a\"b", "a'b;DROP TABLE devices;--", "a\\b", "Ａ", "a\u{200B}b", "\u{FEFF}id", "ﬁ", "<script>",
        "%s%n", "a?b", "a=b", "a@b.c", "…", "\u{10FFFD}",
    ]

    static let inboundKinds = [
        "properties", "status", "signal", "info", "gateway/transfer/status", "properties/set_response",
        "info/get_response", "wifi/scan_response", "gateway/transfer/start_response", "unbind",
    ]

    /// Messages whose outcome is known: the drop reason each must be counted under (or "unchanged", or
    /// "forOtherClients" for answers to requests this agent did not send). Every message
    /// addressed to a victim is invalid or changes nothing; the valid ones go to invalid device ids.
    static func messages(victims: [String]) -> [(topic: String, payload: [UInt8], reason: String)] {
        var messages: [(topic: String, payload: [UInt8], reason: String)] = []
        let validReport = Array(#"{"time":1764450000000,"data":{"switch_1":false}}"#.utf8)
        for id in invalidIDs + controlCharacterIDs {
            let kinds = id == "bad id" ? inboundKinds : ["properties", "status"]
            for kind in kinds {
                let payload = kind == "status" ? Array(#"{"status":"offline"}"#.utf8) : validReport
                messages.append(("things/\(id)/thing/\(kind)", payload, "invalidDeviceID"))
            }
        }

        var index = 0
        func malformed(_ kind: String, _ payload: [UInt8]) {
            messages.append(("things/\(victims[index % victims.count])/thing/\(kind)", payload, "malformed"))
            index += 1
        }
        func malformed(_ kind: String, _ text: String) { malformed(kind, Array(text.utf8)) }

        // Not JSON, not UTF-8, not an object.
        for bytes: [UInt8] in [[0xFF, 0xFE], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80]] {
            malformed("properties", Array(#"{"data":{"label":""#.utf8) + bytes + Array(#""}}"#.utf8))
        }
        malformed("properties", [0xEF, 0xBB, 0xBF] + Array(#"{"data":{"label":"bom"}}"#.utf8))
        malformed("properties", Array(#"{"data":{"label":"nul"#.utf8) + [0x00] + Array(#""}}"#.utf8))
        malformed("properties", Array(#"{"data":{"label":"tab"#.utf8) + [0x09] + Array(#""}}"#.utf8))
        // An empty payload is how MQTT clears a retained message (a removed device's status or info): taken as
        // such, it changes nothing and counts as unchanged.
        messages.append(("things/\(victims[0])/thing/status", [], "unchanged"))
        for text in [
            " \n\t", "null", "true", "0", "\"string\"", "[]", #"[{"data":{"switch_1":true}}]"#, "{", "}",
            #"{"data":{"switch_1":true}"#, #"{"data":{"switch_1":true}}}"#, #"{"data":{"switch_1":true}} {}"#,
            #"{"data":{"switch_1":NaN}}"#, #"{"data":{"switch_1":Infinity}}"#, #"{"data":{"switch_1":true,}}"#,
            #"{"data":{"switch_1":true} /* comment */}"#, #"{'data':{'switch_1':true}}"#, #"{data:{"switch_1":true}}"#,
            #"{"data":{"label":"\ud800"}}"#, #"{"data":{"label":"\x41"}}"#, #"{"data":{"switch_1":01}}"#,
            #"{"data":{"switch_1":+1}}"#, #"{"data":{"switch_1":.5}}"#, #"{"data":{"switch_1":1.}}"#,
            // Deep nesting: over the 16 levels a report may have, and far over.
            #"{"data":{"label":"# + String(repeating: "[", count: 17) + String(repeating: "]", count: 17) + "}}",
            String(repeating: "[", count: 100_000), String(repeating: #"{"a":"#, count: 50_000),
            // Huge numbers: out of any range, or where an integer is due.
            #"{"data":{"bright_value":1e400}}"#, #"{"data":{"bright_value":-1e400}}"#,
            #"{"time":1e400,"data":{"bright_value":1}}"#, #"{"time":99999999999999999999,"data":{"bright_value":1}}"#,
            #"{"time":1764450000000.5,"data":{"bright_value":1}}"#, #"{"time":-5,"data":{"bright_value":1}}"#,
            #"{"time":999999999999999999,"data":{"bright_value":1}}"#,
            // Wrong types and shapes.
            "{}", #"{"data":null}"#, #"{"data":[1,2]}"#, #"{"data":"switch_1"}"#, #"{"data":5}"#,
            #"{"time":"yesterday","data":{"bright_value":1}}"#, #"{"time":true,"data":{"bright_value":1}}"#,
            #"{"time":null,"data":null}"#, #"{"data":{"switch_1":{"value":true,"time":"now"}}}"#,
            #"{"data":{"switch_1":{"value":true,"time":-1}}}"#, #"{"data":{"":1}}"#,
            #"{"data":{"\#(String(repeating: "p", count: 65))":1}}"#,
        ] {
            malformed("properties", text)
        }
        for text in [
            #"{"status":"sleepy"}"#, #"{"status":{"value":2}}"#, #"{"status":null}"#, #"{"status":1}"#,
            #"{"status":{"value":"1"}}"#, #"{"status":{"time":1764450000000}}"#, #"{"time":"x","status":"online"}"#,
            #"{"status":["online"]}"#, #"{"time":1e400,"status":"offline"}"#,
        ] {
            malformed("status", text)
        }
        for text in [
            #"{"wifiSignal":-500}"#, #"{"wifiSignal":"strong"}"#, #"{"rsrp":1e400}"#, "{}",
            #"{"wifiSignal":99999999999999999999}"#, #"{"wifiSignal":-58.5}"#, #"{"wifiSignal":51}"#,
            #"{"wifiSignal":null,"rsrp":null}"#, #"{"time":1764450000000,"rsrp":[-97]}"#,
        ] {
            malformed("signal", text)
        }
        // Info reports without a time take their arrival time, which is newer than the cached one: they would
        // apply if they were valid.
        for text in [
            #"{"data":{"name":42}}"#, #"{"data":{"category":"toaster"}}"#, #"{"data":{"wifiSignal":-999}}"#,
            #"{"data":{"devId":"someone-else","name":"Impostor"}}"#, #"{"data":{"abilities":"wifiList"}}"#,
            #"{"data":{"abilities":[1]}}"#, #"{"data":5}"#, #"{"msgId":"7"}"#, #"{"data":{"connectAbility":"wifi"}}"#,
            #"{"data":{"spaceId":"1001"}}"#, #"{"data":{"hardwareInfo":[1]}}"#, #"{"data":{"spaceId":1e400}}"#,
            #"{"data":{"channel":99999999999999999999}}"#,
            // A wrong field is refused whatever the report's time, even one older than the cached info.
            #"{"time":1764440000000,"data":{"name":42}}"#,
        ] {
            malformed("info", text)
        }
        for text in [
            #"{"data":{"targetDeviceId":"bad id","sourceDeviceId":"gwNew","status":2}}"#,
            #"{"data":{"targetDeviceId":"gwOld","status":2}}"#,
            #"{"data":{"targetDeviceId":"gwOld","sourceDeviceId":"gwNew","status":9}}"#,
            #"{"data":{"targetDeviceId":"gwOld","sourceDeviceId":"gwNew","status":"2"}}"#,
            #"{"data":{"targetDeviceId":"gwOld","sourceDeviceId":"gwNew","status":2,"failedCode":5}}"#,
        ] {
            malformed("gateway/transfer/status", text)
        }
        for text in [
            #"{"code":0}"#, #"{"msgId":"\#(String(repeating: "m", count: 33))","code":0}"#,
            #"{"msgId":"a","code":1.5}"#, #"{"msgId":"a","code":"0"}"#, #"{"msgId":5,"code":0}"#,
            #"{"msgId":"","code":0}"#, #"{"msgId":"a","code":99999999999999999999}"#,
            #"{"msgId":"a","code":0,"message":7}"#,
        ] {
            malformed("properties/set_response", text)
        }

        // Answers nobody asked for.
        for (kind, text) in [
            ("properties/set_response", #"{"msgId":"ghost","time":1764450000012,"code":0}"#),
            ("wifi/scan_response", #"{"msgId":"ghost","code":0,"data":[{"ssid":"x","rssi":-45,"sec":5}]}"#),
            ("gateway/transfer/start_response", #"{"msgId":"ghost","code":1006,"message":"busy"}"#),
            ("info/get_response", #"{"msgId":"ghost","code":1003,"message":"bad data format"}"#),
        ] {
            messages.append(("things/\(victims[0])/thing/\(kind)", Array(text.utf8), "forOtherClients"))
        }

        // Too large: valid JSON that would change the cache, were it not over 256 KiB.
        for size in [256 * 1024 + 1, 1 << 20, 10 << 20] {
            let head = Array(#"{"data":{"label":""#.utf8), tail = Array(#""}}"#.utf8)
            let fill = [UInt8](repeating: UInt8(ascii: "x"), count: size - head.count - tail.count)
            messages.append(("things/\(victims[1])/thing/properties", head + fill + tail, "oversized"))
        }
        return messages
    }

    // MARK: random and mutated messages

    /// docs/protocol.md's examples, by topic kind: the seeds that mutations start from.
    static let seeds: [String: [String]] = [
        "properties": [
            #"{"msgId":"45lkj3551234","time":1764450000000,"data":{"switch_1":{"value":true,"time":1764450000000},"bright_value":{"value":800,"time":1764450000000},"mode":"white"}}"#,
        ],
        "status": [#"{"time":1764450000000,"status":"online"}"#, #"{"time":1764450000000,"status":{"value":3,"time":1764450000000}}"#],
        "signal": [#"{"time":1764450000000,"wifiSignal":-58,"rsrp":-97}"#],
        "info": [
            #"{"msgId":"7","time":1764450000000,"data":{"devId":"fz0","name":"Hall light","productId":"p-light-1","category":"device","ip":"203.0.113.7","lanIp":"192.168.1.23","mac":"a4:c1:38:00:11:22","timezone":"+08:00","netStrength":"76%","wifiSignal":-58,"iccid":null,"rsrp":null,"channel":null,"vendorName":null,"homekitCode":null,"connectAbility":"gateway","gatewayId":"gw01","spaceId":1001,"firmwareVersion":"1.4.2","abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}}"#,
        ],
        "gateway/transfer/status": [
            #"{"msgId":"91","time":1764450000000,"data":{"targetDeviceId":"gwOld","targetDeviceName":"Old gateway","sourceDeviceId":"gwNew","status":2,"failedCode":""}}"#,
        ],
        "properties/set_response": [#"{"msgId":"a1","time":1764450000012,"code":0}"#],
        "info/get_response": [#"{"msgId":"a2","time":1764450000012,"code":0,"data":{"name":"Hall light"}}"#],
        "wifi/scan_response": [
            #"{"msgId":"a3","time":1764450000900,"code":0,"data":[{"ssid":"OS_BASE_2G","rssi":-45,"sec":5},{"ssid":"We","rssi":-52,"sec":5}]}"#,
        ],
        "gateway/transfer/start_response": [#"{"msgId":"a4","time":1764450000012,"code":1006,"message":"busy"}"#],
        "unbind": [#"{"time":1764450000000}"#],
    ]

    static let hostileNumbers = [
        "1e400", "-1e400", "99999999999999999999", "-0", "1E-400", "0.0000000000000000000000001",
        "18446744073709551616", "-9223372036854775809", "9223372036854775807", "1.7976931348623157e309", "4.9e-325",
        "123456789012345678901234567890.5e-3", "0e0", "-0.0e-0",
    ]

    static let interestingBytes: [UInt8] = [
        0x00, 0xFF, 0x22, 0x5C, 0x7B, 0x7D, 0x5B, 0x5D, 0x2C, 0x3A, 0xC0, 0xED, 0xF4, 0x80, 0x30, 0x2D, 0x65, 0x0A,
    ]

    /// One random message: a topic (mostly of the four fuzz devices, sometimes of a random id) and a payload
    /// (mostly a mutated example, else random JSON or random bytes).
    static func randomMessage(using random: inout SeededGenerator) -> (topic: String, payload: [UInt8]) {
        let kind = inboundKinds.randomElement(using: &random)!
        let id = Int.random(in: 0..<10, using: &random) < 7 ? "fz\(Int.random(in: 0..<4, using: &random))"
            : randomID(using: &random)
        let topic = "things/\(id)/thing/\(kind)"
        let seed = Array(seeds[kind]!.randomElement(using: &random)!.utf8)
        let payload: [UInt8]
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<6: payload = mutate(seed, using: &random)
        case 6..<8: payload = Array(randomJSON(depth: 0, using: &random).utf8)
        case 8: payload = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
        default:
            let other = Array(seeds.values.randomElement(using: &random)!.randomElement(using: &random)!.utf8)
            let cut = Int.random(in: 0...seed.count, using: &random)
            payload = Array(seed[..<cut]) + Array(other[Int.random(in: 0...other.count, using: &random)...])
        }
        return (topic, payload)
    }

    static func randomID(using random: inout SeededGenerator) -> String {
        let pool: [String] = Array("abcXYZ019.:_-").map(String.init)
            + [" ", "é", "😀", "Ａ", "$", "*", "\"", "'", "\\", "\u{200B}", "\u{01}", "%", "?", "ﬁ", "\u{10FFFD}"]
        let length = [0, 1, 64, 65, 200, Int.random(in: 2...80, using: &random)].randomElement(using: &random)!
        return (0..<length).map { _ in pool.randomElement(using: &random)! }.joined()
    }

    static func mutate(_ input: [UInt8], using random: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let at = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<8, using: &random) {
            case 0 where !bytes.isEmpty: bytes[at] ^= 1 << UInt8.random(in: 0...7, using: &random)
            case 1 where !bytes.isEmpty: bytes[at] = interestingBytes.randomElement(using: &random)!
            case 2:
                bytes.insert(contentsOf: (0..<Int.random(in: 1...8, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }, at: at)
            case 3 where !bytes.isEmpty: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...16, using: &random)))
            case 4 where !bytes.isEmpty:
                let chunk = bytes[at..<min(bytes.count, at + Int.random(in: 1...32, using: &random))]
                bytes.insert(contentsOf: chunk, at: Int.random(in: 0...bytes.count, using: &random))
            case 5: bytes = Array(bytes.prefix(at))
            case 6:
                // A run of digits becomes a hostile number.
                if let start = bytes[at...].firstIndex(where: { (0x30...0x39).contains($0) }) {
                    let end = bytes[start...].firstIndex(where: { !(0x30...0x39).contains($0) }) ?? bytes.count
                    bytes.replaceSubrange(start..<end, with: Array(hostileNumbers.randomElement(using: &random)!.utf8))
                }
            default:
                let depth = Int.random(in: 10...40, using: &random)
                bytes.insert(contentsOf: Array((String(repeating: "[", count: depth) + "1"
                    + String(repeating: "]", count: depth)).utf8), at: at)
            }
        }
        return bytes
    }

    /// Random JSON text in the shapes the agent reads, with hostile values.
    static func randomJSON(depth: Int, using random: inout SeededGenerator) -> String {
        let keys = ["time", "data", "status", "msgId", "code", "wifiSignal", "rsrp", "value", "message", "name",
                    "targetDeviceId", "sourceDeviceId", "switch_1", "", "\u{0}", "é"]
        let choice = depth > 18 ? Int.random(in: 0..<6, using: &random) : Int.random(in: 0..<9, using: &random)
        switch choice {
        case 0: return "null"
        case 1: return Bool.random(using: &random) ? "true" : "false"
        case 2: return hostileNumbers.randomElement(using: &random)!
        case 3: return String(Int64.random(in: Int64.min...Int64.max, using: &random))
        case 4: return ["\"\"", "\"online\"", "\"offline\"", "\"\\u0000\"", "\"\\ud83d\\ude00\"", "\"é\""]
            .randomElement(using: &random)!
        case 5: return String(Int.random(in: -300...300, using: &random))
        case 6:
            let count = Int.random(in: 0...4, using: &random)
            return "[" + (0..<count).map { _ in randomJSON(depth: depth + 1, using: &random) }.joined(separator: ",") + "]"
        default:
            let count = Int.random(in: 0...5, using: &random)
            return "{" + (0..<count).map { _ in
                "\"\(keys.randomElement(using: &random)!.unicodeScalars.map { $0.value == 0 ? "\\u0000" : String($0) }.joined())\":"
                    + randomJSON(depth: depth + 1, using: &random)
            }.joined(separator: ",") + "}"
        }
    }
}
