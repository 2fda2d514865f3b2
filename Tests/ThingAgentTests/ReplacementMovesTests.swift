import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// A finished gateway replacement moves the faulty gateway's groups, scene actions, link members and local fields
/// to the new gateway, in the write of the re-linked sub-devices; a failed or stalled one moves nothing.
@Suite("Gateway replacement moves", .serialized)
struct ReplacementMovesTests {
    /// The fleet's local data naming the faulty gateway: two groups (one already holding the new gateway), a
    /// scene, a scene with actions for both gateways, a link, local name and icon (the new gateway has a room of
    /// its own), a backup network.
    static func prepare(_ agent: Agent) throws {
        try agent.apply(.createGroup("hall", devices: ["gwOld", "lamp"]))
        try agent.apply(.createGroup("gateways", devices: ["gwOld", "gwNew"]))
        try agent.createScene(Scene(name: "night", actions: [
            Scene.Action(deviceId: "gwOld", properties: ["led_switch": false]),
            Scene.Action(deviceId: "lamp", properties: ["switch_1": false])]))
        try agent.createScene(Scene(name: "both", actions: [
            Scene.Action(deviceId: "gwOld", properties: ["led_switch": false, "alarm_volume": "low"]),
            Scene.Action(deviceId: "lamp", properties: ["switch_1": true]),
            Scene.Action(deviceId: "gwNew", properties: ["led_switch": true])]))
        try agent.createLink(DeviceLink(name: "leds", members: [DeviceLink.Member("gwOld:led_switch")!,
                                                                DeviceLink.Member("gwPlain:led_switch")!]))
        try agent.edit("gwOld", DeviceEdit(name: "Hall gateway", room: "Hall", icon: "https://icons.example/gw.png"))
        try agent.edit("gwNew", DeviceEdit(room: "Attic"))
        try agent.apply(.addNetwork(device: "gwOld", BackupNetwork(ssid: "Spare", password: "12345678", priority: 1)))
    }

    static func withFleet(_ broker: MosquittoBroker, stall: Duration = .seconds(120), flushInterval: Duration? = nil,
                          _ body: (Agent, GatewayFleet, String) async throws -> Void) async throws {
        try await withAgent(broker, configure: {
            useShippedModels(&$0)
            $0.transferStallTimeout = stall
            if let flushInterval { $0.cache.flushInterval = flushInterval }
        }) { agent in
            let database = agent.configuration.cache.database
            let fleet = try await GatewayFleet.start(broker)
            try await fleet.cached(by: agent)
            try await fleet.new.publish("properties", #"{"time":\#(t0),"data":{"led_switch":true}}"#)
            try prepare(agent)
            try await body(agent, fleet, database)
            await fleet.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFinishMovesGroupsScenesLinksAndLocalFieldsOnceAndRecordsIt() async throws {
        try await withBroker { broker in
            try await Self.withFleet(broker) { agent, fleet, database in
                // The faulty gateway is offline: its grace period runs in the offline watch.
                try await waitUntil(timeout: .seconds(20)) { agent.offlineWatch.isWatching("gwOld") }
                let answering = try await GatewayTransferTests.accept(fleet)
                try await agent.gatewayTransferManager(deviceId: "gwNew").transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                try await fleet.report(.finish, time: t0 + 101)
                try await waitUntil(timeout: .seconds(20)) { (try? agent.replacements().isEmpty) == false }
                #expect(!agent.offlineWatch.isWatching("gwOld"), "a replaced gateway is not warned about")

                let replacement = try #require(try agent.replacements(involving: "gwNew").first)
                #expect(replacement.old == "gwOld" && replacement.new == "gwNew" && replacement.time == t0 + 101)
                #expect(replacement.groups == ["gateways", "hall"])
                #expect(replacement.scenes == ["both", "night"])
                #expect(replacement.links == ["leds"])
                #expect(replacement.fields == ["name", "icon"])
                #expect(replacement.summary.contains("moved from gwOld to gwNew: groups gateways, hall; scenes both, night"))

                // What a reader of the file sees, all in the same write as the sub-devices.
                let local = try LocalStore(path: database, readOnly: true)
                #expect(try local.group(named: "hall")?.devices == ["gwNew", "lamp"])
                #expect(try local.group(named: "gateways")?.devices == ["gwNew"], "the new gateway is in once")
                #expect(try local.scene(named: "night")?.actions.map(\.deviceId) == ["gwNew", "lamp"])
                // One action for the new gateway, where its own was, its own value winning.
                #expect(try local.scene(named: "both")?.actions == [
                    Scene.Action(deviceId: "lamp", properties: ["switch_1": true]),
                    Scene.Action(deviceId: "gwNew", properties: ["alarm_volume": "low", "led_switch": true])])
                #expect(try local.link(named: "leds")?.members.map(\.description) == ["gwNew:led_switch", "gwPlain:led_switch"])
                let moved = try local.metadata("gwNew")
                #expect(moved.name == "Hall gateway" && moved.room == "Attic" && moved.icon == "https://icons.example/gw.png")
                #expect(try local.metadata("gwOld") == DeviceMetadata(), "the faulty gateway's local data goes")
                #expect(try local.backupNetworks("gwOld").isEmpty)
                #expect((try CacheReader(path: database).device("sub1"))?.info.gatewayId == "gwNew")

                // The links in memory moved too: the new gateway's change now sets gwPlain.
                #expect(agent.linkEngine.links.first?.members.map(\.deviceId) == ["gwNew", "gwPlain"])
                let plain = SetFollower(try #require(fleet.others.first { $0.id == "gwPlain" }))
                try await plain.start(reports: false)
                try await fleet.new.publish("properties", #"{"time":\#(t0 + 200),"data":{"led_switch":false}}"#)
                try await waitUntil(timeout: .seconds(20)) { plain.sets == [#"{"led_switch":false}"#] }
                answering.cancel()
            }
        }
    }

    /// The file gets the moves at the next flush, the engine at the finish: a link change in between (here the
    /// flush is an hour away) must not reload the faulty gateway's members from the file.
    @Test(.timeLimit(.minutes(1)))
    func aLinkChangeRightAfterAFinishKeepsTheMovedMembers() async throws {
        try await withBroker { broker in
            try await Self.withFleet(broker, flushInterval: .seconds(3600)) { agent, fleet, database in
                let answering = try await GatewayTransferTests.accept(fleet)
                try await agent.gatewayTransferManager(deviceId: "gwNew").transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                try await fleet.report(.finish, time: t0 + 101)
                try await waitUntil(timeout: .seconds(20)) {
                    agent.linkEngine.links.first { $0.name == "leds" }?.members.map(\.deviceId) == ["gwNew", "gwPlain"]
                }
                try agent.createLink(DeviceLink(name: "far", members: [DeviceLink.Member("gwFar:led_switch")!,
                                                                       DeviceLink.Member("gwPlain:led_switch")!]))
                let leds = agent.linkEngine.links.first { $0.name == "leds" }
                #expect(leds?.members.map(\.deviceId) == ["gwNew", "gwPlain"])
                #expect(agent.linkEngine.links.map(\.name).sorted() == ["far", "leds"])
                let local = try LocalStore(path: database, readOnly: true)
                #expect(try local.link(named: "leds")?.members.map(\.deviceId) == ["gwNew", "gwPlain"])
                answering.cancel()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFailedOrStalledTransferMovesNothing() async throws {
        try await withBroker { broker in
            try await Self.withFleet(broker, stall: .milliseconds(500)) { agent, fleet, database in
                let answering = try await GatewayTransferTests.accept(fleet)
                let manager = agent.gatewayTransferManager(deviceId: "gwNew")
                try await manager.transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                try await fleet.report(.failed, failedCode: "subdevice_unreachable", time: t0 + 101)
                try await waitUntil(timeout: .seconds(20)) {
                    (try? CacheReader(path: database).device("gwNew"))??.transfer?.status == .failed
                }
                // A second one that stalls: ended by the agent as failed (timeout).
                try await manager.transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 200)
                try await waitUntil(timeout: .seconds(20)) {
                    (try? CacheReader(path: database).device("gwNew"))??.transfer?.failedCode == "timeout"
                }
                // The gateway finishes after the verdict (stamped later than it): not trusted, counted, nothing moves.
                try await fleet.report(.finish, time: Timestamp.current + 60_000)
                try await waitUntil(timeout: .seconds(20)) { agent.statistics.guarded[.untrustedTransfer] == 1 }
                try await waitUntil(timeout: .seconds(20)) {
                    (try? CacheReader(path: database).device("gwNew"))??.transfer?.status == .finish
                }
                let local = try LocalStore(path: database, readOnly: true)
                #expect(try agent.replacements().isEmpty)
                #expect(try local.group(named: "hall")?.devices == ["gwOld", "lamp"])
                #expect(try local.group(named: "gateways")?.devices == ["gwNew", "gwOld"])
                #expect(try local.scene(named: "night")?.actions.map(\.deviceId) == ["gwOld", "lamp"])
                #expect(try local.scene(named: "both")?.actions.map(\.deviceId) == ["gwOld", "lamp", "gwNew"])
                #expect(try local.link(named: "leds")?.members.map(\.deviceId) == ["gwOld", "gwPlain"])
                #expect(try local.metadata("gwOld").name == "Hall gateway")
                #expect(try local.metadata("gwNew").name == nil)
                #expect(try local.backupNetworks("gwOld").count == 1)
                #expect(agent.cache.subDevices(of: "gwOld").map(\.id) == ["sub1", "sub2"])
                answering.cancel()
            }
        }
    }

    /// The shipped models and `p-gateway-2`, a later gateway product whose `led_switch` is an enum, not a bool;
    /// its `alarm_volume` is as `p-gateway-1`'s.
    static func modelsWithASecondGatewayProduct() throws -> String {
        let directory = try makeTemporaryDirectory()
        let shipped = shippedModelsDirectory()
        for file in try FileManager.default.contentsOfDirectory(atPath: shipped) {
            try FileManager.default.copyItem(atPath: shipped + "/" + file, toPath: directory + "/" + file)
        }
        try #"""
            {"productId":"p-gateway-2","properties":[
              {"code":"alarm_volume","type":"enum","range":["mute","low","middle","high"],"access":"rw"},
              {"code":"led_switch","type":"enum","range":["on","off"],"access":"rw"}]}
            """#.write(toFile: directory + "/p-gateway-2.json", atomically: true, encoding: .utf8)
        return directory
    }

    /// A replacement gateway that reports a newer product between the start and the finish: each moved link member
    /// is checked against that product's model as `link create` would; one it refuses is dropped, a link left with
    /// fewer than two members (also one that named both gateways) is deleted, in the file and in the daemon's
    /// links, and the record (what `transfer` prints) says so.
    @Test(.timeLimit(.minutes(1)))
    func movedLinkMembersTheNewGatewaysModelRefusesAreDroppedAndOneMemberLinksDissolved() async throws {
        let models = try Self.modelsWithASecondGatewayProduct()
        defer { try? FileManager.default.removeItem(atPath: models) }
        try await withBroker { broker in
            try await withAgent(broker, configure: { $0.modelsDirectory = models }) { agent in
                let database = agent.configuration.cache.database
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let links: [(String, [String])] = [
                    ("leds", ["gwOld:led_switch", "gwPlain:led_switch"]),
                    ("trio", ["gwOld:led_switch", "gwPlain:led_switch", "gwFar:led_switch"]),
                    ("twins", ["gwOld:led_switch", "gwNew:led_switch"]),
                    ("volumes", ["gwOld:alarm_volume", "gwPlain:alarm_volume"]),
                ]
                for (name, members) in links {
                    try agent.createLink(DeviceLink(name: name, members: members.compactMap(DeviceLink.Member.init)))
                }
                let answering = try await GatewayTransferTests.accept(fleet)
                try await agent.gatewayTransferManager(deviceId: "gwNew").transfer(fromGateway: "gwOld")
                try await fleet.new.info(#"{"productId":"p-gateway-2"}"#, time: t0 + 50)
                try await waitUntil(timeout: .seconds(20)) { agent.cache.device("gwNew")?.info.productId == "p-gateway-2" }
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                try await fleet.report(.finish, time: t0 + 101)
                try await waitUntil(timeout: .seconds(20)) { (try? agent.replacements().isEmpty) == false }

                let replacement = try #require(try agent.replacements(involving: "gwNew").first)
                #expect(replacement.links == ["trio", "volumes"])
                let json = JSONValue.object(replacement.json)
                #expect(json["dissolvedLinks"] == ["leds", "twins"])
                let refusal = "gwNew:led_switch (enum on,off) is not compatible with gwPlain:led_switch (bool)"
                #expect(json["droppedLinkMembers"] == .array(["leds", "trio"].map { link in
                    .object(JSONObject([("link", .string(link)), ("device", "gwNew"), ("code", "led_switch"),
                                        ("reason", .string(refusal))]))
                }))
                #expect(replacement.summary.contains("links trio, volumes"), "\(replacement.summary)")
                #expect(replacement.summary.contains("dropped from link trio: gwNew:led_switch (\(refusal))"),
                        "\(replacement.summary)")
                #expect(replacement.summary.contains("links dissolved (fewer than two members left): leds, twins"),
                        "\(replacement.summary)")

                let expected = [["gwPlain:led_switch", "gwFar:led_switch"], ["gwNew:alarm_volume", "gwPlain:alarm_volume"]]
                let local = try LocalStore(path: database, readOnly: true)
                #expect(try local.links().map(\.name) == ["trio", "volumes"])
                #expect(try local.links().map { $0.members.map(\.description) } == expected)
                #expect(try local.link(named: "leds") == nil && local.link(named: "twins") == nil)
                #expect(agent.linkEngine.links.map(\.name) == ["trio", "volumes"])
                #expect(agent.linkEngine.links.map { $0.members.map(\.description) } == expected)
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }
}
