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

    /// A kill between the plugin making a device's role and client and the cache recording them leaves the claim in
    /// the file (written before anything is made at the broker) and the two at the broker, unrecorded. The next
    /// start recognises them as its own and deletes them, so the id activates again.
    @Test(.timeLimit(.minutes(2)))
    func aKillDuringActivationLeavesNothingThatBlocksTheDeviceId() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let configuration = fleet.configuration
        let made = try await withProvisioningAgent(configuration) { agent in try await agent.pair().made }
        let user = made.pairing.username
        do {
            // The state the kill left: claimed in the file, made at the broker, never recorded.
            let store = try PairingStore(path: configuration.cache.database)
            #expect(try store.claim(user, device: "d1", gateway: nil, now: Timestamp.now()))
            #expect(try store.grants(.client).contains("d1") == false)
        }
        let leftover = try await fleet.dynsec([
            .createRole(AccessPolicy.deviceRole("d1")),
            .createClient(username: "d1", password: "lost-with-the-answer", clientID: "d1",
                          roles: [AccessPolicy.deviceRole("d1")]),
        ])
        #expect(leftover.allSatisfy { $0.succeeded }, "\(leftover)")

        try await withProvisioningAgent(configuration) { agent in
            #expect(try agent.pairings().first { $0.username == user }?.state == .pending)
            let bootstrap = try await DeviceConnection.connect(fleet.broker, user: user, password: made.password)
            let answer = try await bootstrap.activate(pairing: user, token: made.token, data: ["devId": "d1"])
            await bootstrap.stop()
            #expect(answer["code"] == 0, "\(answer)")
            let password = try #require(answer["data"]?["password"]?.stringValue)
            #expect(try await canConnect(fleet.broker, user: "d1", password: "lost-with-the-answer") == false)
            let device = try await DeviceConnection.connect(fleet.broker, user: "d1", password: password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"] != nil }
            await device.stop()
        }
    }

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

    /// A sub-device's topics stay with the gateway that activated it (or took it over in a transfer the agent
    /// started), whatever `gatewayId` an info report names: the operators' CLI and the gateway itself may publish
    /// one. The cached info still follows the report.
    @Test(.timeLimit(.minutes(2)))
    func aReportedGatewayIdMovesNoBrokerGrant() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let made = try await fleet.dynsec([
            .createClient(username: "thing-agent-cli", password: "cli-secret", clientID: nil, roles: []),
        ])
        #expect(made.allSatisfy { $0.succeeded })
        try await withProvisioningAgent(fleet.configuration) { agent in
            let first = try await agent.pairAndActivate(fleet.broker, device: "gw1", info: Self.gatewayInfo)
            let second = try await agent.pairAndActivate(fleet.broker, device: "gw2", info: Self.gatewayInfo)
            let gw1 = try await DeviceConnection.connect(fleet.broker, user: first.user, password: first.password)
            let gw2 = try await DeviceConnection.connect(fleet.broker, user: second.user, password: second.password)
            let session = try await agent.pair(gatewayId: "gw1")
            let answer = try await gw1.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                data: ["devId": "sub1", "category": "subdevice", "gatewayId": "gw1"])
            #expect(answer["code"] == 0)

            let cli = try await DeviceConnection.connect(fleet.broker, user: "thing-agent-cli", password: "cli-secret")
            for (reporter, time) in [(cli, Timestamp.now()), (gw1, Timestamp.now() + 1)] {
                let info = JSONObject([("time", .integer(time)), ("data", .object(["gatewayId": "gw2"]))])
                try await reporter.client.publish("things/sub1/thing/info", payload: JSONValue.object(info).serializedBytes(),
                                                  qos: .atLeastOnce)
                try await waitUntil(timeout: .seconds(10)) { agent.cache.device("sub1")?.infoTime == time }
                #expect(agent.cache.device("sub1")?.info.gatewayId == "gw2")
                try await agent.provisioning?.access.sync()
                let gw1Role = agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw1")) ?? []
                let gw2Role = agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw2")) ?? []
                #expect(gw1Role.contains(.send("things/sub1/thing/properties")))
                #expect(!gw2Role.contains(.send("things/sub1/thing/properties")))
            }
            try await gw2.expectDenied("sub1", own: "gw2", agent: agent)
            try await gw1.report("sub1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("sub1")?.properties["switch_1"]?.value == true }
            await cli.stop()
            await gw1.stop()
            await gw2.stop()
        }
    }

    /// A retained activation is answered once and cleared, whether the agent got it replayed at its start or live
    /// (a live delivery does not say the publisher retained it): the broker no longer keeps its token, and the next
    /// start is not handed it again.
    @Test(.timeLimit(.minutes(2)))
    func aRetainedActivationIsClearedFromTheBrokerOnceHandled() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let configuration = fleet.configuration
        let tester = try await fleet.tester()
        let (replayed, live) = ("pair-0000abcd", "pair-0000abce")
        func retain(_ pairing: String) async throws {
            try await tester.client.subscribe("things/\(pairing)/thing/activate_response", qos: .atLeastOnce)
            let request = JSONObject([("msgId", "r1"), ("time", .integer(Timestamp.now())),
                                      ("data", .object(["token": "00112233", "devId": "d9"]))])
            try await tester.client.publish("things/\(pairing)/thing/activate",
                                            payload: JSONValue.object(request).serializedBytes(), qos: .atLeastOnce,
                                            retain: true)
        }
        @Sendable func answered(_ pairing: String) -> Bool {
            tester.messages.contains { $0.topic == "things/\(pairing)/thing/activate_response" }
        }
        try await retain(replayed)
        try await withProvisioningAgent(configuration) { agent in
            try await retain(live)
            try await waitUntil(timeout: .seconds(10)) { answered(replayed) && answered(live) }
            // Refused as retained (replayed at the subscription), or as an unknown token (live).
            #expect(agent.provisioningCounters?.refusals == [1003: 1, 1012: 1])
            // Cleared before the answer went out.
            #expect(try await fleet.retained(on: "things/\(replayed)/thing/activate").isEmpty)
            #expect(try await fleet.retained(on: "things/\(live)/thing/activate").isEmpty)
        }
        try await withProvisioningAgent(configuration) { agent in
            // Activations are answered in turn: one answered after the start means a replay would have been too.
            _ = try await agent.pairAndActivate(fleet.broker, device: "d1")
            #expect(agent.provisioningCounters?.refusals.isEmpty == true)
        }
        await tester.stop()
    }

    /// The device's first answer is lost: its retry with the same token, after the old one-second life of the
    /// bootstrap credentials, is answered again with the same credentials. Once the device speaks with them, the
    /// bootstrap credentials go.
    @Test(.timeLimit(.minutes(2)))
    func aLostActivationAnswerIsSentAgainWithTheSameCredentials() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let session = try await agent.pair()
            let user = session.made.pairing.username
            let bootstrap = try await DeviceConnection.connect(fleet.broker, user: user, password: session.made.password)
            // Not subscribed to the answer: it is lost.
            let request = JSONObject([("msgId", "lost"), ("time", .integer(Timestamp.now())),
                                      ("data", .object(["token": .string(session.made.token), "devId": "d1"]))])
            try await bootstrap.client.publish("things/\(user)/thing/activate",
                                               payload: JSONValue.object(request).serializedBytes(), qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(10)) { (try? agent.pairings().first?.state) == .used }
            try await Task.sleep(for: .seconds(3))
            // Deleting the bootstrap client would have dropped this connection (its reconnect waits a minute).
            try #require(bootstrap.client.state == .connected, "the bootstrap credentials died before the retry")
            let again = try await bootstrap.activate(pairing: user, token: session.made.token, data: ["devId": "d1"])
            #expect(again["code"] == 0, "\(again)")
            let password = try #require(again["data"]?["password"]?.stringValue)
            #expect(again["data"]?["username"] == "d1")
            // Another device on the used token is still refused.
            #expect(try await bootstrap.activate(pairing: user, token: session.made.token, data: ["devId": "d2"])["code"] == 1011)
            #expect(agent.provisioningCounters?.activated == 1)

            let device = try await DeviceConnection.connect(fleet.broker, user: "d1", password: password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"] != nil }
            try await waitUntil(timeout: .seconds(15)) {
                (try? await canConnect(fleet.broker, user: user, password: session.made.password)) == false
            }
            await bootstrap.stop()
            await device.stop()
        }
    }

    /// The same request twice (a QoS 1 duplicate, or a device that asked again at once) gets the same answer twice,
    /// one activation.
    @Test(.timeLimit(.minutes(2)))
    func aDuplicatedActivationGetsTheSameAnswerTwice() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let session = try await agent.pair()
            let user = session.made.pairing.username
            let bootstrap = try await DeviceConnection.connect(fleet.broker, user: user, password: session.made.password)
            let answers = "things/\(user)/thing/activate_response"
            try await bootstrap.client.subscribe(answers, qos: .atLeastOnce)
            let request = JSONObject([("msgId", "twice"), ("time", .integer(Timestamp.now())),
                                      ("data", .object(["token": .string(session.made.token), "devId": "d1"]))])
            for _ in 0..<2 {
                try await bootstrap.client.publish("things/\(user)/thing/activate",
                                                   payload: JSONValue.object(request).serializedBytes(), qos: .atLeastOnce)
            }
            try await waitUntil(timeout: .seconds(20)) { bootstrap.messages.filter { $0.topic == answers }.count == 2 }
            let both = try bootstrap.messages.filter { $0.topic == answers }.map { try JSONParser.parse($0.payload) }
            #expect(both.map { $0["code"] } == [0, 0], "\(both)")
            #expect(both.map { $0["msgId"] } == ["twice", "twice"])
            #expect(both[0]["data"]?["password"] != nil)
            #expect(both[0]["data"] == both[1]["data"])
            #expect(agent.provisioningCounters?.activated == 1)
            await bootstrap.stop()
        }
    }
}

extension ProvisionedFleet {
    /// The retained message the broker keeps on `topic`, if any: a new subscriber gets it before a probe published
    /// after its subscription (the broker delivers one connection's messages in order).
    func retained(on topic: String) async throws -> [MQTTMessage] {
        var configuration = MQTTConfiguration(url: broker.url, clientID: "test-retained-\(UInt16.random(in: 0...UInt16.max))")
        configuration.username = Self.agentUser
        configuration.password = Self.agentPassword
        let client = try MQTTClient(configuration: configuration)
        let received = client.messages
        try await client.connect()
        let probe = "thing-agent/test-probe/\(UInt32.random(in: 0...UInt32.max))"
        try await client.subscribe(topic, qos: .atLeastOnce)
        try await client.subscribe(probe, qos: .atLeastOnce)
        try await client.publish(probe, payload: Array("probe".utf8), qos: .atLeastOnce)
        var kept: [MQTTMessage] = []
        for await message in received {
            if message.topic == probe { break }
            if message.topic == topic { kept.append(message) }
        }
        await client.disconnect()
        return kept
    }
}
