import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `AlinkTopics`, the table of an Alink device's topics, against what the Alink dialect reads and sends, the broker
/// roles provisioning computes from it, and the shipped ACL's Alink lines.
@Suite("Alink topics and access")
struct AlinkTopicsTests {
    let dialect = AlinkDialect()
    let policy = AccessPolicy(topics: Topics(root: "things"), agentClientID: "thing-agent",
                              eventsTopic: "thing-agent/events", replyPrefix: "thing-agent/replies/")

    /// A topic of a filter: each `+` an identifier.
    static func sample(_ filter: String) -> String { filter.replacing("+", with: "alarm") }

    /// Whether MQTT filter `filter` matches `topic` (`+` one level, `#` the rest).
    static func matches(_ filter: String, _ topic: String) -> Bool {
        let f = filter.split(separator: "/", omittingEmptySubsequences: false)
        let t = topic.split(separator: "/", omittingEmptySubsequences: false)
        for (index, level) in f.enumerated() {
            if level == "#" { return true }
            guard index < t.count, level == "+" || level == t[index] else { return false }
        }
        return f.count == t.count
    }

    @Test func everyTopicADevicePublishesIsOneTheAgentSubscribesToAndReads() throws {
        for filter in AlinkTopics.filters(of: "a1PK.lamp1", gateway: true, publisher: .device) {
            let topic = Self.sample(filter)
            let route = try dialect.route(topic)
            #expect(route?.device == "a1PK.lamp1", "\(topic) is not read")
            #expect(dialect.subscriptions.contains { Self.matches($0.filter, topic) }, "\(topic) is not subscribed")
        }
        // And the dialect subscribes to nothing a device does not publish (a service's call is heard back too).
        for (filter, _) in dialect.subscriptions {
            let device = Self.sample(filter.replacing("/+/+/", with: "/a1PK/lamp1/"))
            #expect(AlinkTopics.everyDevice(.device).contains { Self.matches($0, device) }
                    || AlinkTopics.everyDevice(.agent).contains { Self.matches($0, device) }, "\(filter)")
        }
    }

    @Test func everyTopicTheAgentSendsADeviceIsOneTheDeviceMayRead() throws {
        let readable = AlinkTopics.filters(of: "a1PK.lamp1", gateway: true, publisher: .agent)
        var sent: [String] = []
        for (kind, data) in [(RequestKind.setProperties, JSONValue.object(["bright": 1])),
                             (.action, .object(["actionCode": "identify", "inputParams": .object([:])])),
                             (.otaStart, .object(["url": "http://x/y", "version": "2.0.0", "sha256": .string(String(repeating: "a", count: 64)),
                                                  "size": 10]))] {
            sent.append(try #require(dialect.request(kind, device: "a1PK.lamp1", msgId: "t1", data: data, time: 0)).topic)
        }
        // The answers the daemon owes the device for each thing it sends.
        let requests: [(String, String)] = [
            ("/sys/a1PK/lamp1/thing/event/property/post", #"{"id":"1","params":{"bright":1}}"#),
            ("/sys/a1PK/lamp1/thing/event/alarm/post", #"{"id":"2","params":{"value":{}},"method":"thing.event.alarm.post"}"#),
            ("/sys/a1PK/lamp1/thing/deviceinfo/update", #"{"id":"3","params":[]}"#),
            ("/sys/a1PK/lamp1/thing/deviceinfo/delete", #"{"id":"4","params":[]}"#),
            ("/ext/ntp/a1PK/lamp1/request", #"{"deviceSendTime":"1"}"#),
            ("/sys/a1PK/lamp1/thing/topo/add", #"{"id":"5","params":[{"productKey":"a1S","deviceName":"s1"}]}"#),
            ("/sys/a1PK/lamp1/thing/topo/delete", #"{"id":"6","params":[{"productKey":"a1S","deviceName":"s1"}]}"#),
            ("/ext/session/a1PK/lamp1/combine/login", #"{"id":"7","params":{"productKey":"a1S","deviceName":"s1"}}"#),
            ("/ext/session/a1PK/lamp1/combine/logout", #"{"id":"8","params":{"productKey":"a1S","deviceName":"s1"}}"#),
            ("/ext/session/a1PK/lamp1/combine/batch_login", #"{"id":"9","params":{"deviceList":[{"productKey":"a1S","deviceName":"s1"}]}}"#),
            ("/ext/session/a1PK/lamp1/combine/batch_logout", #"{"id":"10","params":[{"productKey":"a1S","deviceName":"s1"}]}"#),
        ]
        // The questions the daemon answers from what it knows.
        for (topic, payload, known) in [
            ("/sys/a1PK/lamp1/thing/ota/firmware/get", #"{"id":11,"params":{}}"#, QueryAnswer.firmware(nil)),
            ("/sys/a1PK/lamp1/thing/topo/get", #"{"id":"12","params":{}}"#, .subDevices([("a1S.s1", "a1S")])),
        ] {
            let route = try #require(try dialect.route(topic), "\(topic)")
            let decoded = try Array(payload.utf8).withUnsafeBytes { try dialect.decode(route, payload: $0, arrival: 1) }
            guard case .query(let query) = decoded.message else { Issue.record("\(topic)"); continue }
            sent.append(try #require(dialect.answer(query, device: "a1PK.lamp1", with: known)).topic)
        }
        for (topic, payload) in requests {
            let route = try #require(try dialect.route(topic), "\(topic)")
            let decoded = try Array(payload.utf8).withUnsafeBytes { try dialect.decode(route, payload: $0, arrival: 1) }
            #expect(!decoded.replies.isEmpty, "\(topic) is answered")
            sent += decoded.replies.map(\.topic)
        }
        for topic in sent {
            #expect(readable.contains { Self.matches($0, topic) }, "the device may not read \(topic)")
        }
        // And the device reads nothing the agent does not send it.
        for filter in readable {
            #expect(sent.contains { Self.matches(filter, $0) }, "nothing is sent on \(filter)")
        }
    }

    @Test func anAlinkDevicesRoleNamesOnlyItsOwnTopicsAndItsLinkkitNames() {
        let acls = policy.deviceTopics("a1PK.lamp1", dialect: "alink")
        #expect(acls.contains(.send("/sys/a1PK/lamp1/thing/event/+/post")))
        #expect(acls.contains(.send("/ota/device/inform/a1PK/lamp1")))
        #expect(acls.contains(.subscribe("/sys/a1PK/lamp1/thing/service/property/set")))
        #expect(acls.contains(.subscribe("/ota/device/upgrade/a1PK/lamp1")))
        #expect(!acls.contains(.send("/sys/a1PK/lamp1/thing/service/property/set")))
        #expect(acls.allSatisfy { $0.topic.contains("/a1PK/lamp1/") || $0.topic.hasSuffix("/a1PK/lamp1") })
        #expect(!acls.contains { $0.topic.contains("topo") || $0.topic.contains("/ext/session/") })
        #expect(!acls.contains { $0.topic.hasPrefix("things/") || $0.topic.contains("#") })
        #expect(AccessPolicy.brokerUser("a1PK.lamp1", dialect: "alink") == "lamp1&a1PK")
        #expect(AccessPolicy.brokerClientID("a1PK.lamp1", dialect: "alink") == "a1PK&lamp1|securemode=-2,authType=connwl|")
        #expect(AccessPolicy.brokerUser("my.lamp", dialect: nil) == "my.lamp")
        // The device is named by the broker's client events under either.
        #expect(dialect.device(forClient: "a1PK&lamp1|securemode=-2,authType=connwl|", user: "lamp1&a1PK") == "a1PK.lamp1")
        #expect(dialect.device(forClient: "a1PK&lamp1|securemode=-2,authType=connwl|", user: nil) == "a1PK.lamp1")
    }

    @Test func anAlinkGatewaysRoleAddsItsSessionsAndItsSubDevicesTopics() {
        let acls = policy.deviceRole("a1GW.gw1", subDevices: ["a1S.s1"], pairings: ["pair-0001"],
                                     dialects: ["a1GW.gw1": "alink", "a1S.s1": "alink"])
        #expect(acls.contains(.send("/sys/a1GW/gw1/thing/topo/add")))
        #expect(acls.contains(.send("/ext/session/a1GW/gw1/combine/batch_login")))
        #expect(acls.contains(.subscribe("/ext/session/a1GW/gw1/combine/login_reply")))
        #expect(acls.isSuperset(of: policy.deviceTopics("a1S.s1", dialect: "alink")))
        #expect(!acls.contains(.send("/sys/a1S/s1/thing/topo/add")), "a sub-device is no gateway")
        #expect(acls.contains(.send("things/pair-0001/thing/activate")), "it activates its sub-devices")
        // A gateway with no sub-device yet, known as one by its category.
        #expect(policy.deviceRole("a1GW.gw2", subDevices: [], pairings: [], dialects: ["a1GW.gw2": "alink"], gateway: true)
            .contains(.send("/sys/a1GW/gw2/thing/topo/add")))
    }

    @Test func theAgentSendsEveryAlinkRequestAndAnswerAndTheCLIOnlySetsAndServices() {
        for filter in AlinkTopics.everyDevice(.agent) {
            #expect(policy.agentRole.contains(.send(filter)), "\(filter)")
        }
        for (filter, _) in dialect.subscriptions { #expect(policy.agentRole.contains(.subscribe(filter))) }
        #expect(policy.agentRole.contains(.subscribe(BrokerLog.topic)))
        let cliSends = policy.cliRole.filter { $0.type == "publishClientSend" && $0.topic.hasPrefix("/") }.map(\.topic)
        #expect(Set(cliSends) == ["/sys/+/+/thing/service/property/set", "/sys/+/+/thing/service/+"])
        #expect(policy.cliRole.contains(.subscribe("/sys/+/+/thing/event/+/post")))
    }

    /// deploy/mosquitto.acl's Alink lines are the table: the agent writes what the platform publishes, the
    /// example device block writes what a device publishes and reads what the platform publishes, for itself.
    @Test func theShippedACLsAlinkLinesAreTheTable() throws {
        let users = try Self.shippedACLTopicLines()
        func topics(_ user: String, _ access: String) -> Set<String> {
            Set((users[user] ?? []).filter { $0.hasPrefix("topic \(access) /") }.map { String($0.dropFirst("topic \(access) ".count)) })
        }
        #expect(topics("thing-agent", "write") == Set(AlinkTopics.everyDevice(.agent)))
        #expect(topics("lamp1&a1PK", "write") == Set(AlinkTopics.filters(of: "a1PK.lamp1", gateway: false, publisher: .device)))
        #expect(topics("lamp1&a1PK", "read") == Set(AlinkTopics.filters(of: "a1PK.lamp1", gateway: false, publisher: .agent)))
        #expect(topics("thing-agent-cli", "write") == ["/sys/+/+/thing/service/property/set", "/sys/+/+/thing/service/+"])
    }
}

extension AlinkTopicsTests {
    /// The `topic` lines of deploy/mosquitto.acl by the user they stand under ("" for those before any `user`).
    static func shippedACLTopicLines() throws -> [String: [String]] {
        let acl = try String(contentsOfFile: TestSupport.repositoryRoot() + "/deploy/mosquitto.acl", encoding: .utf8)
        var users: [String: [String]] = [:]
        var user = ""
        for line in acl.split(separator: "\n").map(String.init) {
            if line.hasPrefix("user ") { user = String(line.dropFirst(5)) } else if line.hasPrefix("topic ") {
                users[user, default: []].append(line)
            }
        }
        return users
    }
}
