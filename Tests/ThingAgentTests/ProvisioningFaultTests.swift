import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// What a kill, a lost answer, a retained request or a device's own word must not do to provisioning, against a real
/// mosquitto with the dynamic-security plugin and the agent's real cache file (docs/faults.md, "Provisioning").
@Suite("Provisioning faults", .serialized)
struct ProvisioningFaultTests {
    static let gatewayInfo: JSONObject = ["category": "gateway", "productId": "p-gateway-1"]

    /// docs/protocol.md promises 1013 for a broker name the agent did not make, for a sub-device too: its gateway's
    /// role would otherwise gain that name's topics.
    @Test(.timeLimit(.minutes(2)))
    func aSubDeviceNamedAfterAForeignBrokerClientIsRefused() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let made = try await fleet.dynsec([
            .createClient(username: "app-user", password: "app-secret", clientID: nil, roles: []),
        ])
        #expect(made.allSatisfy { $0.succeeded })
        try await withProvisioningAgent(fleet.configuration) { agent in
            let credentials = try await agent.pairAndActivate(fleet.broker, device: "gw1", info: Self.gatewayInfo)
            let gateway = try await DeviceConnection.connect(fleet.broker, user: credentials.user,
                                                             password: credentials.password)
            let session = try await agent.pair(gatewayId: "gw1")
            let answer = try await gateway.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                    data: ["devId": "app-user", "category": "subdevice", "gatewayId": "gw1"])
            #expect(answer["code"] == 1013, "\(answer)")
            #expect(agent.cache.device("app-user") == nil)
            #expect(try agent.pairings().first { $0.username == session.made.pairing.username }?.state == .pending)
            try await agent.provisioning?.access.sync()
            let role = try #require(agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw1")))
            #expect(!role.contains(.send("things/app-user/thing/properties")))
            #expect(!role.contains(.subscribe("things/app-user/thing/properties/set")))
            try await gateway.expectDenied("app-user", own: "gw1", agent: agent)
            await gateway.stop()
        }
    }
}
