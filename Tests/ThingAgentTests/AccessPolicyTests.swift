import Testing
@testable import ThingAgent
@testable import ThingAgentCore

/// The roles computed from the fleet (pure: the broker's side is in ProvisioningTests).
@Suite("Access policy")
struct AccessPolicyTests {
    let policy = AccessPolicy(topics: Topics(root: "things"), agentClientID: "thing-agent",
                              eventsTopic: "thing-agent/events", replyPrefix: "thing-agent/replies/")

    @Test func aDevicesRoleNamesOnlyItsOwnTopicsLiterally() {
        let acls = policy.deviceRole("d1", subDevices: [], pairings: [])
        #expect(acls.contains(.send("things/d1/thing/properties")))
        #expect(acls.contains(.send("things/d1/thing/properties/set_response")))
        #expect(acls.contains(.subscribe("things/d1/thing/properties/set")))
        #expect(acls.contains(.subscribe("things/d1/thing/unbind")))
        // Never a request to itself, an activation, a wildcard or another device.
        #expect(!acls.contains(.send("things/d1/thing/properties/set")))
        #expect(acls.allSatisfy { $0.topic.hasPrefix("things/d1/thing/") && !$0.topic.contains("+") && !$0.topic.contains("#") })
        #expect(!acls.contains { $0.topic.contains("activate") })
    }

    @Test func aGatewaysRoleAddsItsSubDevicesAndOpenPairings() {
        let acls = policy.deviceRole("gw", subDevices: ["s1"], pairings: ["pair-0001"])
        #expect(acls.isSuperset(of: policy.deviceTopics("s1")))
        #expect(acls.contains(.send("things/pair-0001/thing/activate")))
        #expect(acls.contains(.subscribe("things/pair-0001/thing/activate_response")))
        #expect(!acls.contains(.send("things/pair-0001/thing/activate_response")))
    }

    @Test func changesRemoveBeforeTheyAddAndRepeatNothing() {
        let old = policy.deviceRole("gw", subDevices: ["s1"], pairings: [])
        let new = policy.deviceRole("gw", subDevices: ["s2"], pairings: [])
        let changes = AccessPolicy.changes(role: "device-gw", from: old, to: new)
        let removals = changes.prefix { if case .removeRoleACL = $0 { true } else { false } }
        #expect(removals.count == policy.deviceTopics("s1").count)
        #expect(changes.count == removals.count + policy.deviceTopics("s2").count)
        #expect(AccessPolicy.changes(role: "device-gw", from: new, to: new).isEmpty)
    }

    @Test func theCLIReadsNoActivationAndServicesCannotStartUpgrades() {
        #expect(policy.cliRole.contains(.denyReceive("things/+/thing/activate")))
        #expect(policy.cliRole.contains(.denyReceive("things/+/thing/activate_response")))
        #expect(policy.serviceControlRole.contains(.denySend("thing-agent/api/thing-agent/request/ota")))
        #expect(!policy.serviceRole.contains { $0.topic.hasPrefix("things/") })
        #expect(!policy.serviceRole.contains { $0.topic.hasSuffix("#") && $0.type == "publishClientSend" })
    }
}
