import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Removing a sub-device with provisioning: it never had broker credentials of its own, and the removal says so
/// (and takes its topics from its gateway's role), where it once said they were deleted.
@Suite("Provisioning: removing a sub-device", .serialized)
struct SubDeviceRemovalTests {
    @Test(.timeLimit(.minutes(2)))
    func removingASubDeviceSaysItHadNoCredentialsOfItsOwn() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let gatewayInfo: JSONObject = ["category": "gateway", "productId": "p-gateway-1"]
            let made = try await agent.pairAndActivate(fleet.broker, device: "gw1", info: gatewayInfo, spaceId: 7)
            let gw1 = try await DeviceConnection.connect(fleet.broker, user: made.user, password: made.password)
            let session = try await agent.pair(spaceId: 7, gatewayId: "gw1")
            let answer = try await gw1.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                data: ["devId": "sub1", "category": "subdevice", "gatewayId": "gw1"])
            #expect(answer["code"] == 0)
            try await gw1.report("sub1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("sub1")?.info.gatewayId == "gw1" }

            let removal = try await agent.removeDevice("sub1")
            #expect(removal.brokerCredentials == .noneOfItsOwn(gateway: "gw1"))
            #expect(removal.credentialsSummary?.contains("no broker credentials of its own") == true)
            #expect(DeviceRemoval(json: .object(removal.json), device: "sub1").brokerCredentials == removal.brokerCredentials)
            #expect(agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw1"))?
                .contains(.send("things/sub1/thing/properties")) == false)
            #expect(try await agent.removeDevice("gw1").brokerCredentials == .deleted, "a gateway's own do go")
            await gw1.stop()
        }
    }
}
