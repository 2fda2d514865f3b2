import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Pairing, activation and per-device broker access, against a real mosquitto with the dynamic-security plugin.
@Suite("Provisioning", .serialized)
struct ProvisioningTests {
    @Test(.timeLimit(.minutes(2)))
    func aDeviceActivatesAndReportsWithItsOwnCredentials() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let activated = agent.events.events(kinds: .activated)
            let session = try await agent.pair(spaceId: 1001, productId: "p-light-1")
            #expect(session.made.token.count >= 32)
            #expect(DeviceID.isValid(session.made.pairing.username))
            let bootstrap = try await DeviceConnection.connect(fleet.broker, user: session.made.pairing.username,
                                                               password: session.made.password)
            let answer = try await bootstrap.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                      data: ["devId": "d1", "productId": "p-light-1", "name": "Hall light"])
            #expect(answer["code"]?.int64Value == 0)
            let user = try #require(answer["data"]?["username"]?.stringValue)
            let password = try #require(answer["data"]?["password"]?.stringValue)
            #expect(user == "d1")
            #expect(answer["data"]?["clientId"] == "d1")
            // Pinned: the device's credentials work with its own id as client id only.
            #expect(try await canConnect(fleet.broker, user: user, password: password))
            #expect(try await canConnect(fleet.broker, user: user, password: password, clientID: "thing-agent") == false)
            // The library's session ends with the device, its space from the pairing.
            let result = await session.result(timeout: .seconds(10))
            #expect(try result.get().spaceId == 1001)
            #expect(agent.cache.device("d1")?.info.name == "Hall light")
            for await event in activated {
                #expect(event == .activated(deviceId: "d1", pairing: session.made.pairing.username, gatewayId: nil))
                break
            }
            // Its own credentials work for its own topics.
            let device = try await DeviceConnection.connect(fleet.broker, user: user, password: password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"] != nil }
            // The bootstrap credentials stop working once the pairing is used.
            try await waitUntil(timeout: .seconds(15)) {
                (try? await canConnect(fleet.broker, user: session.made.pairing.username,
                                       password: session.made.password)) == false
            }
            #expect(try agent.pairings().first?.state == .used)
            await device.stop()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func everyRefusalHasItsCodeAndChangesNothing() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let handler = AgentTests.RecordingLogHandler()
        let logger = AgentLogger(label: "provisioning", level: .debug, handler: handler)
        try await withProvisioningAgent(fleet.configuration, logger: logger) { agent in
            let first = try await agent.pair()
            let other = try await agent.pair()
            let bootstrap = try await DeviceConnection.connect(fleet.broker, user: first.made.pairing.username,
                                                               password: first.made.password)
            let user = first.made.pairing.username
            // 1003: no device id.
            #expect(try await bootstrap.activate(pairing: user, token: first.made.token, data: [:])["code"] == 1003)
            // 1003 too: not JSON at all (answered with an empty msgId).
            try await bootstrap.client.publish("things/\(user)/thing/activate", payload: Array("{not json".utf8), qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(10)) {
                bootstrap.messages.contains { (try? JSONParser.parse($0.payload))?["msgId"] == "" }
            }
            let garbled = try #require(bootstrap.messages.compactMap { try? JSONParser.parse($0.payload) }.first { $0["msgId"] == "" })
            #expect(garbled["code"] == 1003)
            // 1012: an unknown token, and another pairing's token on this pairing's topic.
            #expect(try await bootstrap.activate(pairing: user, token: "00" + first.made.token,
                                                 data: ["devId": "d1"])["code"] == 1012)
            #expect(try await bootstrap.activate(pairing: user, token: other.made.token, data: ["devId": "d1"])["code"] == 1012)
            // 1013: a device already bound.
            _ = try await agent.pairAndActivate(fleet.broker, device: "bound-1")
            #expect(try await bootstrap.activate(pairing: user, token: first.made.token,
                                                 data: ["devId": "bound-1"])["code"] == 1013)
            // Still pending after all that; then used once, and 1011 the second time (from a client that outlives
            // the bootstrap credentials, which go once the pairing is used).
            let tester = try await fleet.tester()
            #expect(try await bootstrap.activate(pairing: user, token: first.made.token, data: ["devId": "d2"])["code"] == 0)
            #expect(try await tester.activate(pairing: user, token: first.made.token, data: ["devId": "d3"])["code"] == 1011)
            #expect(agent.cache.device("d3") == nil)
            #expect(agent.provisioningCounters?.refusals == [1003: 2, 1012: 2, 1013: 1, 1011: 1])
            // Counted in the metrics; logged with the pairing and the reason, never with a token.
            #expect(agent.metricsText().contains(#"thing_agent_activations_total{outcome="refused",code="1012"} 2"#))
            let refusals = handler.all.filter { $0.message == "refused an activation" }
            #expect(Set(refusals.compactMap { $0.metadata["code"] }) == ["1003", "1011", "1012", "1013"])
            for token in [first.made.token, other.made.token] {
                #expect(!handler.all.contains { record in
                    record.message.contains(token) || record.metadata.values.contains { $0.contains(token) }
                })
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func anExpiredTokenIsRefusedAndItsCredentialsGo() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let tester = try await fleet.tester()
            let session = try await agent.pair(ttl: .seconds(2))
            #expect(try await canConnect(fleet.broker, user: session.made.pairing.username, password: session.made.password))
            #expect(await session.result() == .failure(.expired))
            let answer = try await tester.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                   data: ["devId": "late-1"])
            #expect(answer["code"] == 1010)
            #expect(agent.cache.device("late-1") == nil)
            try await waitUntil(timeout: .seconds(15)) {
                (try? await canConnect(fleet.broker, user: session.made.pairing.username,
                                       password: session.made.password)) == false
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aDeviceIsDeniedAnotherDevicesTopicsAndARemovedOneCannotConnect() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let (user, password) = try await agent.pairAndActivate(fleet.broker, device: "d1")
            _ = try await agent.pairAndActivate(fleet.broker, device: "d2")
            let device = try await DeviceConnection.connect(fleet.broker, user: user, password: password)
            try await device.expectDenied("d2", own: "d1", agent: agent)
            await device.stop()

            try await agent.removeDevice("d1")
            #expect(try await canConnect(fleet.broker, user: user, password: password) == false)
            #expect(agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("d1")) == nil)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aGatewaySpeaksForItsSubDeviceUntilAReplacementMovesIt() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        try await withProvisioningAgent(fleet.configuration) { agent in
            let gatewayInfo: JSONObject = ["category": "gateway", "productId": "p-gateway-1",
                                           "abilities": ["gatewayTransfer"]]
            let old = try await agent.pairAndActivate(fleet.broker, device: "gw1", info: gatewayInfo, spaceId: 7)
            let new = try await agent.pairAndActivate(fleet.broker, device: "gw2", info: gatewayInfo, spaceId: 7)
            let gw1 = try await DeviceConnection.connect(fleet.broker, user: old.user, password: old.password)
            let gw2 = try await DeviceConnection.connect(fleet.broker, user: new.user, password: new.password)

            // gw1 activates its sub-device over the pairing's topics, with its own connection.
            let session = try await agent.pair(spaceId: 7, gatewayId: "gw1")
            let answer = try await gw1.activate(pairing: session.made.pairing.username, token: session.made.token,
                                                data: ["devId": "sub1", "category": "subdevice", "gatewayId": "gw1"])
            #expect(answer["code"] == 0)
            #expect(answer["data"]?["password"] == nil)
            try await gw1.report("sub1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("sub1")?.properties["switch_1"]?.value == true }

            // gw2 takes over gw1's sub-devices in a transfer started here (with provisioning only such a transfer
            // is trusted): the topics move to its role in one change.
            let accepting = try await gw2.acceptNext("gateway/transfer/start", to: "gw2")
            try await agent.gatewayTransferManager(deviceId: "gw2").transfer(fromGateway: "gw1")
            try await accepting.value
            let finish = JSONObject([("time", .integer(Timestamp.now())), ("data", .object([
                "targetDeviceId": "gw1", "sourceDeviceId": "gw2", "status": 4, "failedCode": ""]))])
            try await gw2.client.publish("things/gw2/thing/gateway/transfer/status",
                                         payload: JSONValue.object(finish).serializedBytes(), qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(15)) {
                agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw2"))?
                    .contains(.send("things/sub1/thing/properties")) == true
            }
            #expect(agent.provisioning?.access.acls(of: AccessPolicy.deviceRole("gw1"))?
                .contains(.send("things/sub1/thing/properties")) == false)
            try await gw2.report("sub1", ["switch_1": false])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("sub1")?.properties["switch_1"]?.value == false }
            try await gw1.expectDenied("sub1", own: "gw1", agent: agent)
            #expect(agent.cache.device("sub1")?.properties["switch_1"]?.value == false)
            await gw1.stop()
            await gw2.stop()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aRestartRepairsARoleTheBrokersPluginFileLost() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let configuration = fleet.configuration
        let credentials = try await withProvisioningAgent(configuration) { agent in
            try await agent.pairAndActivate(fleet.broker, device: "d1")
        }
        // The broker comes back from a plugin file without the device's role.
        fleet.broker.kill()
        let file = fleet.broker.dynamicSecurityFile
        var root = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file)))).objectValue ?? [:]
        let roles = root["roles"]?.arrayValue ?? []
        let kept = roles.filter { $0["rolename"]?.stringValue != AccessPolicy.deviceRole("d1") }
        #expect(kept.count == roles.count - 1)
        root["roles"] = .array(kept)
        try Data(JSONValue.object(root).serializedBytes()).write(to: URL(fileURLWithPath: file))
        try await fleet.broker.restart()
        #expect(try await fleet.dynsec([.getRole(AccessPolicy.deviceRole("d1"))]).first?.error == "Role not found")

        try await withProvisioningAgent(configuration) { agent in
            let device = try await DeviceConnection.connect(fleet.broker, user: credentials.user,
                                                            password: credentials.password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"]?.value == true }
            await device.stop()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func theCLIAndServiceRolesReachWhatTheyNeedAndNoActivation() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let made = try await fleet.dynsec([
            .createClient(username: "thing-agent-cli", password: "cli-secret", clientID: nil, roles: []),
            .createClient(username: "svc-1", password: "svc-secret", clientID: nil, roles: []),
        ])
        #expect(made.allSatisfy { $0.succeeded })
        var configuration = fleet.configuration
        configuration.provisioning.serviceUsers = ["svc-1"]
        try await withProvisioningAgent(configuration) { agent in
            // The service: pinned to its name, reads the event feed, calls the API, writes no device topic.
            #expect(try await canConnect(fleet.broker, user: "svc-1", password: "svc-secret", clientID: configuration.mqtt.clientID) == false)
            let service = try await DeviceConnection.connect(fleet.broker, user: "svc-1", password: "svc-secret")
            try await service.client.subscribe("thing-agent/events/+/activated", qos: .atLeastOnce)
            try await service.client.subscribe("thing-agent/replies/svc-1/#", qos: .atLeastOnce)
            let cli = try await DeviceConnection.connect(fleet.broker, user: "thing-agent-cli", password: "cli-secret")
            try await cli.client.subscribe("things/+/thing/#", qos: .atLeastOnce)

            let (user, password) = try await agent.pairAndActivate(fleet.broker, device: "d1")
            try await waitUntil(timeout: .seconds(10)) {
                service.messages.contains { $0.topic == "thing-agent/events/d1/activated" }
            }
            // The device speaks after it read its answer: the CLI, which follows every device topic, hears that
            // and never the activation or the answer that carried the credentials.
            let device = try await DeviceConnection.connect(fleet.broker, user: user, password: password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { cli.messages.contains { $0.topic == "things/d1/thing/properties" } }
            #expect(!cli.messages.contains { $0.topic.hasSuffix("/thing/activate") || $0.topic.hasSuffix("/activate_response") })

            try? await service.report("svc-1", ["switch_1": true])
            let request = JSONObject([("id", "h1"), ("replyTo", "thing-agent/replies/svc-1/x")])
            try await service.client.publish("thing-agent/api/\(configuration.mqtt.clientID)/request/health",
                                             payload: JSONValue.object(request).serializedBytes(), qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(10)) { service.messages.contains { $0.topic == "thing-agent/replies/svc-1/x" } }
            #expect(agent.cache.device("svc-1") == nil)
            await device.stop()
            await cli.stop()
            await service.stop()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aNewCacheFileLeavesTheBrokersDevicesAlone() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let configuration = fleet.configuration
        let credentials = try await withProvisioningAgent(configuration) { agent in
            try await agent.pairAndActivate(fleet.broker, device: "d1")
        }
        var fresh = configuration
        fresh.cache.database = fleet.directory + "/fresh.sqlite"
        try await withProvisioningAgent(fresh) { agent in
            #expect(agent.cache.count == 0)
            // Its start is done (it is subscribed): the device's client and role are still there and work.
            let device = try await DeviceConnection.connect(fleet.broker, user: credentials.user, password: credentials.password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"] != nil }
            await device.stop()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func reservedAndForeignNamesAreRefusedAndTheirClientsStay() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let made = try await fleet.dynsec([
            .createClient(username: "thing-agent-cli", password: "cli-secret", clientID: nil, roles: []),
            .createClient(username: "app-user", password: "app-secret", clientID: nil, roles: []),
        ])
        #expect(made.allSatisfy { $0.succeeded })
        try await withProvisioningAgent(fleet.configuration) { agent in
            let other = try await agent.pair()
            for name in ["thing-agent", "thing-agent-cli", "app-user", other.made.pairing.username, "pair-00000000"] {
                let session = try await agent.pair()
                let bootstrap = try await DeviceConnection.connect(fleet.broker, user: session.made.pairing.username,
                                                                   password: session.made.password)
                let answer = try await bootstrap.activate(pairing: session.made.pairing.username,
                                                          token: session.made.token, data: ["devId": .string(name)])
                #expect(answer["code"] == 1013, "\(name): \(answer)")
                await bootstrap.stop()
                // The token was not burnt by the refusal.
                #expect(try agent.pairings().first { $0.username == session.made.pairing.username }?.state == .pending)
            }
            // At the broker: the agent's, the CLI's, the application's and the other pairing's clients are all there.
            let answers = try await fleet.dynsec(["thing-agent", "thing-agent-cli", "app-user", other.made.pairing.username]
                .map(DynsecCommand.getClient))
            let errors = answers.compactMap(\.error)
            #expect(errors.isEmpty, "\(errors)")
            #expect(try await canConnect(fleet.broker, user: "app-user", password: "app-secret"))
            // Bootstrap credentials are pinned: they cannot connect as the agent.
            #expect(try await canConnect(fleet.broker, user: other.made.pairing.username, password: other.made.password,
                                         clientID: fleet.configuration.mqtt.clientID) == false)
            #expect(other.made.json["clientId"]?.stringValue == other.made.pairing.username)
            // Revoked by its user name (the token is shown once): its credentials go.
            #expect(try await agent.revokePairing(token: other.made.pairing.username).username == other.made.pairing.username)
            #expect(try await canConnect(fleet.broker, user: other.made.pairing.username, password: other.made.password) == false)
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aNewCacheFileThenAPairingThenARestartLeavesOldDevicesAndOperatorRolesAlone() async throws {
        let fleet = try await ProvisionedFleet.start()
        defer { fleet.stop() }
        let operatorRole = try await fleet.dynsec([
            .createRole("device-readers"),
            .createClient(username: "readers", password: "readers-secret", clientID: nil, roles: ["device-readers"]),
        ])
        #expect(operatorRole.allSatisfy { $0.succeeded })
        let configuration = fleet.configuration
        let old = try await withProvisioningAgent(configuration) { agent in
            try await agent.pairAndActivate(fleet.broker, device: "d1")
        }
        var fresh = configuration
        fresh.cache.database = fleet.directory + "/fresh.sqlite"
        try await withProvisioningAgent(fresh) { agent in
            _ = try await agent.pairAndActivate(fleet.broker, device: "d2")
        }
        // The restart on the file that knows d2 alone.
        try await withProvisioningAgent(fresh) { agent in
            let device = try await DeviceConnection.connect(fleet.broker, user: old.user, password: old.password)
            try await device.report("d1", ["switch_1": true])
            try await waitUntil(timeout: .seconds(10)) { agent.cache.device("d1")?.properties["switch_1"] != nil }
            await device.stop()
            // device-d1 and the operator's device-readers at least (the first file's last pairing role too, when
            // its cleanup had not run before that agent stopped).
            #expect((agent.provisioning?.access.unmanagedRoles.load(ordering: .relaxed) ?? 0) >= 2)
        }
        let answers = try await fleet.dynsec([.getClient("d1"), .getRole("device-d1"), .getClient("readers"),
                                              .getRole("device-readers")])
        let errors = answers.compactMap(\.error)
        #expect(errors.isEmpty, "\(errors)")
        #expect(try await canConnect(fleet.broker, user: "readers", password: "readers-secret"))
    }
}
