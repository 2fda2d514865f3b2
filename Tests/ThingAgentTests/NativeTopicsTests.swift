import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The native dialect's topics are declared once (`NativeTopics.all`): the subscriptions, the parser and the
/// broker roles come from that table, and the shipped static ACL is checked against it here, so that a topic added
/// to one and not the others fails.
@Suite("Native topics: one table")
struct NativeTopicsTests {
    let topics = Topics(root: "things")

    @Test func theAgentSubscribesToAndParsesExactlyWhatDevicesPublishAndUnbind() throws {
        let subscribed = Set(topics.subscriptions.map(\.filter))
        let expected = Set(NativeTopics.all.filter { $0.publisher == .device || $0.kind == .unbind }
            .map { "things/+/\($0.suffix)" })
        #expect(subscribed == expected)
        for topic in NativeTopics.all {
            let parsed = try? topics.parse(topics.topic(topic, device: "d1"))
            #expect(parsed?.kind == topic.kind, "\(topic.suffix)")
            #expect(topic.kind == nil || parsed?.device == "d1")
        }
    }

    @Test func aDevicesRoleSendsWhatItPublishesAndReadsWhatTheAgentDoes() {
        let policy = AccessPolicy(topics: topics, agentClientID: "thing-agent", eventsTopic: "thing-agent/events",
                                  replyPrefix: "thing-agent/replies/")
        let role = policy.deviceTopics("d1")
        #expect(role.count == NativeTopics.all.count)
        for topic in NativeTopics.all {
            let acl: RoleACL = topic.publisher == .device ? .send("things/d1/\(topic.suffix)")
                : .subscribe("things/d1/\(topic.suffix)")
            #expect(role.contains(acl), "\(topic.suffix)")
        }
    }

    /// deploy/mosquitto.acl's `%u` patterns are the table: a device writes what it publishes and reads what the
    /// agent publishes, nothing more, nothing less. The example gateway's block names its sub-device's topics the
    /// same way (a sub-device is no gateway: the transfer topics are left out).
    @Test func theShippedACLsPatternsAreTheTable() throws {
        let acl = try String(contentsOfFile: repositoryRoot + "/deploy/mosquitto.acl", encoding: .utf8)
        let lines = acl.split(separator: "\n").map(String.init)
        func suffixes(_ prefix: String) -> Set<String> {
            Set(lines.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) })
        }
        let writes = Set(NativeTopics.all.filter { $0.publisher == .device }.map(\.suffix))
        let reads = Set(NativeTopics.all.filter { $0.publisher == .agent }.map(\.suffix))
        #expect(suffixes("pattern write things/%u/") == writes)
        #expect(suffixes("pattern read things/%u/") == reads)
        let subWrites = suffixes("topic write things/sub-example-1/"), subReads = suffixes("topic read things/sub-example-1/")
        #expect(subWrites.isSubset(of: writes) && subReads.isSubset(of: reads))
        let left = writes.subtracting(subWrites).union(reads.subtracting(subReads))
        #expect(left.allSatisfy { $0.hasPrefix("thing/gateway/transfer/") }, "\(left.sorted())")
    }
}
