import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The pure halves of the input bounds (docs/faults.md, "Hostile input"): numbers, reply topics, the rate
/// limit, clock skew, the property table and the terminal escapes. The daemon's side is in
/// Tests/EndToEndTests/InputGuardTests.swift.
@Suite("Input bounds")
struct InputBoundsTests {
    /// Each time setting refuses what would trap where it becomes a `Duration`, and says which key.
    @Test(arguments: ["sessionExpiry", "keepAlive", "flushInterval", "requestTimeout", "offlineGracePeriod",
                      "transferStallTimeout", "reconnectMinDelay", "reconnectMaxDelay", "maxClockSkew"])
    func timeSettingsRefuseNumbersThatWouldTrap(_ key: String) throws {
        for text in ["1e300", "-1e300", "inf", "nan", "1e10", "-1"] {
            var configuration = AgentConfiguration()
            #expect(throws: AgentConfiguration.Error.self, "\(key)=\(text)") {
                try configuration.apply(key: key, text: text, source: "--\(key)")
            }
            #expect(configuration == AgentConfiguration())
        }
        var configuration = AgentConfiguration()
        try configuration.apply(key: key, text: "12", source: "--\(key)")
        #expect(configuration != AgentConfiguration(), "a sensible value is taken")
    }

    @Test func countSettingsRefuseZeroNegativeAndHuge() throws {
        for key in ["maxInFlight", "eventQueueLimit", "apiPageSize", "maxPropertiesPerDevice", "maxDevices"] {
            for text in ["0", "-5", "1e300", "99999999999999999999", "1.5"] {
                var configuration = AgentConfiguration()
                #expect(throws: AgentConfiguration.Error.self, "\(key)=\(text)") {
                    try configuration.apply(key: key, text: text, source: key)
                }
            }
        }
        var configuration = AgentConfiguration()
        try configuration.apply(key: "maxPropertiesPerDevice", text: "7", source: "env")
        #expect(configuration.cache.maxPropertiesPerDevice == 7)
    }

    /// A config file with a hostile number is an error naming the key, never a trap at start.
    @Test func aConfigFileWithAHugeKeepaliveIsAnErrorNamingTheKey() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/agent.json"
        try Data(#"{"keepAlive":1e300}"#.utf8).write(to: URL(fileURLWithPath: path))
        var configuration = AgentConfiguration()
        let expected = AgentConfiguration.Error(.agentConfig, source: path, key: "keepAlive", "invalid value 1e+300")
        #expect(throws: expected) {
            try configuration.apply(file: path)
        }
        #expect(expected.description == "config file \(path): keepAlive: invalid value 1e+300")
    }

    @Test func theAPITimeoutIsChecked() throws {
        #expect(try Agent.timeout(nil) == nil)
        #expect(try Agent.timeout(.double(1.5)) == .milliseconds(1500))
        for bad: JSONValue in [.double(-1e300), .double(1e300), .integer(0), .integer(-1), .string("5"), .bool(true)] {
            #expect(throws: APIError.self, "\(bad)") { try Agent.timeout(bad) }
        }
    }

    @Test func replyTopicsMustLieUnderThePrefixAndNameAClient() {
        let prefix = "thing-agent/replies/"
        #expect(ReplyTopics.client(of: "thing-agent/replies/svc/42", prefix: prefix) == "svc")
        #expect(ReplyTopics.client(of: "thing-agent/replies/svc", prefix: prefix) == "svc")
        for outside in ["things/devB/thing/unbind", "thing-agent/events/x/status", "thing-agent/agents/a/status",
                        "thing-agent/replies/", "thing-agent/replies//x", "thing-agent/replies/+/x",
                        "thing-agent/replies/#", "Thing-agent/replies/svc", "thing-agent/repliesX/svc"] {
            #expect(ReplyTopics.client(of: outside, prefix: prefix) == nil, "\(outside)")
        }
    }

    /// A prefix given without its final slash gets one: `thing-agent/replies` would otherwise refuse every normal
    /// reply topic and take look-alikes (`thing-agent/replies-x/…`).
    @Test func aReplyPrefixWithoutItsSlashGetsOne() throws {
        var configuration = AgentConfiguration()
        try configuration.apply(key: "replyPrefix", text: "thing-agent/replies", source: "--reply-prefix")
        #expect(configuration.api.replyPrefix == "thing-agent/replies/")
        #expect(ReplyTopics.client(of: "thing-agent/replies/svc/1", prefix: configuration.api.replyPrefix) == "svc")
        #expect(ReplyTopics.client(of: "thing-agent/replies-x/svc/1", prefix: configuration.api.replyPrefix) == nil)
        try configuration.apply(key: "replyPrefix", text: "svc/answers/", source: "env")
        #expect(configuration.api.replyPrefix == "svc/answers/", "a prefix with its slash stays as it is")
    }

    @Test func theRateLimitAllowsABurstThenRefillsPerClient() {
        let limiter = APIRateLimiter(rate: 2)
        let start = ContinuousClock.now
        #expect(limiter.allow("a", now: start))
        #expect(limiter.allow("a", now: start))
        #expect(!limiter.allow("a", now: start))
        #expect(limiter.allow("b", now: start), "another client has its own budget")
        #expect(limiter.allow("a", now: start + .milliseconds(500)), "one token back after half a second")
        #expect(!limiter.allow("a", now: start + .milliseconds(500)))
        #expect(APIRateLimiter(rate: 0).allow("a", now: start), "0 is no limit")
        // Made-up client names do not grow the table without bound.
        let many = APIRateLimiter(rate: 1, maxClients: 10)
        for n in 0..<1000 { _ = many.allow("c\(n)", now: start) }
        #expect(many.allow("fresh", now: start))
    }

    /// Pages walk the whole fleet in id order, each device once, with the filter applied.
    @Test func cachePagesWalkTheFleetInIdOrder() {
        var devices: [String: DeviceSnapshot] = [:]
        for n in (0..<1000).shuffled() {
            var device = DeviceSnapshot(id: "d\(n)", seenAt: 0)
            device.online = n % 3 != 0
            devices[device.id] = device
        }
        let cache = DeviceCache(devices)
        var seen: [String] = []
        var after: String?
        while true {
            let page = cache.page(after: after, count: 7) { $0.online == true }
            seen += page.map(\.id)
            guard let last = page.last else { break }
            after = last.id
        }
        let expected = devices.values.filter { $0.online == true }.map(\.id).sorted()
        #expect(seen == expected)
    }

    @Test func timesFarAheadAreReplacedByTheArrival() {
        let arrival: Millis = 1_764_450_000_000
        let skew: Millis = 300_000
        let ahead: Millis = 99_999_999_999_999
        let checks: [(InboundMessage, InboundMessage)] = [
            (.status(online: true, time: ahead), .status(online: true, time: arrival)),
            (.info(["name": "x"], time: ahead), .info(["name": "x"], time: arrival)),
            (.signal(wifi: SignalReading(dBm: -50, time: ahead), rsrp: nil),
             .signal(wifi: SignalReading(dBm: -50, time: arrival), rsrp: nil)),
            (.properties([("a", PropertyValue(value: 1, time: ahead)), ("b", PropertyValue(value: 2, time: arrival))]),
             .properties([("a", PropertyValue(value: 1, time: arrival)), ("b", PropertyValue(value: 2, time: arrival))])),
        ]
        for (message, expected) in checks {
            let (corrected, changed) = message.correctingClockSkew(arrival: arrival, maxSkew: skew)
            #expect(changed)
            #expect(corrected == expected)
        }
        let near = InboundMessage.status(online: true, time: arrival + skew)
        #expect(near.correctingClockSkew(arrival: arrival, maxSkew: skew) == (near, false))
        #expect(near.correctingClockSkew(arrival: .max - 1, maxSkew: .max).corrected == false, "no overflow")
    }

    /// Small tables (a sorted array) and large ones (a dictionary) answer the same, in code order.
    @Test(arguments: [10, PropertyTable.arrayLimit, PropertyTable.arrayLimit + 1, 2000])
    func propertyCodesAreFoundWhateverTheOrderAndCount(_ count: Int) {
        var table = PropertyTable()
        var random = SystemRandomNumberGenerator()
        let codes = (0..<count).map { "c\($0)" }.shuffled(using: &random)
        for (n, code) in codes.enumerated() { table[code] = PropertyValue(value: .integer(Int64(n)), time: 1) }
        #expect(table.count == count)
        #expect(table.keys == codes.sorted())
        #expect(Array(table).map(\.key) == codes.sorted())
        for (n, code) in codes.enumerated() { #expect(table[code]?.value == .integer(Int64(n))) }
        table["c5"] = nil
        #expect(table["c5"] == nil)
        #expect(table.count == count - 1)
        table["c3"] = PropertyValue(value: "x", time: 2)
        #expect(table["c3"]?.value == "x")
        var same = PropertyTable()
        for code in codes.reversed() where code != "c5" { same[code] = table[code] }
        #expect(same == table)
        same["c3"] = PropertyValue(value: "y", time: 2)
        #expect(same != table)
    }

    @Test func aDeviceKeepsAtMostMaxPropertiesCodesButKnownOnesUpdate() throws {
        var device = DeviceSnapshot(id: "d", seenAt: 0)
        let first = try device.apply(.properties((0..<10).map { ("c\($0)", PropertyValue(value: 1, time: 1)) }),
                                     now: 1, maxProperties: 4)
        #expect(device.properties.count == 4)
        #expect(first.refusedCodes == 6)
        let next = try device.apply(.properties([("c0", PropertyValue(value: 2, time: 2)),
                                                 ("new", PropertyValue(value: 2, time: 2))]), now: 2, maxProperties: 4)
        #expect(device.properties["c0"]?.value == 2)
        #expect(device.properties["new"] == nil)
        #expect(next.refusedCodes == 1)
    }

    @Test func controlCharactersAreEscapedForTheTerminal() {
        #expect("Hall \u{1B}]0;owned\u{07}light".terminalSafe() == #"Hall \u{1B}]0;owned\u{7}light"#)
        #expect("a\nb".terminalSafe() == #"a\u{A}b"#)
        #expect("a\nb".terminalSafe(keepingNewlines: true) == "a\nb")
        #expect("\u{9B}31m\u{7F}\u{202E}x".terminalSafe() == #"\u{9B}31m\u{7F}\u{202E}x"#)
        let plain = "Küche 😀 light"
        #expect(plain.terminalSafe() == plain)
    }
}
