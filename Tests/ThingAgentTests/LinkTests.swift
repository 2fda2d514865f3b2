import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Multi-control links through the library: a daemon-role agent, devices on a real broker, a real cache file.
@Suite("Multi-control links", .serialized)
struct LinkTests {
    /// A device of `product`, online, with `properties` reported at t0, that follows the sets it gets.
    static func device(_ id: String, product: String, properties: String? = #"{"switch_1":false}"#,
                       _ broker: MosquittoBroker, reports: Bool = true, reportFirst: Bool = false,
                       rewrite: (@Sendable (String) -> String)? = nil) async throws -> SetFollower {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        try await device.info(#"{"name":"\#(id)","productId":"\#(product)"}"#, time: t0)
        try await device.status(true, time: t0)
        if let properties { try await device.properties(properties, time: t0) }
        let follower = SetFollower(device)
        try await follower.start(reports: reports, reportFirst: reportFirst, rewrite: rewrite)
        return follower
    }

    /// Waits until everything published before now reached the agent and its watches: a marker report from a
    /// device outside every link, handled after whatever the agent's connection delivered before it.
    static func settle(_ agent: Agent, _ broker: MosquittoBroker) async throws {
        let marker = try SimulatedDevice("marker", brokerURL: broker.url)
        try await marker.connect()
        let stamp = Int64(Date().timeIntervalSince1970 * 1000)
        try await marker.properties(#"{"n":\#(stamp)}"#, time: stamp)
        try await waitUntil(timeout: .seconds(20)) {
            agent.cache.device("marker")?.properties["n"]?.value == .integer(stamp)
        }
        await marker.disconnect()
    }

    static func value(_ agent: Agent, _ device: String, _ code: String) -> JSONValue? {
        agent.cache.device(device)?.properties[code]?.value
    }

    @Test(.timeLimit(.minutes(2)))
    func aChangeReachesEveryOtherMemberOnceAndTheirAnswersTriggerNothing() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let hall = try await Self.device("hall", product: "p-light-1", broker)
                let stairs = try await Self.device("stairs", product: "p-light-1", broker)
                let socket = try await Self.device("socket", product: "p-plug-1", broker)
                try await waitUntil(timeout: .seconds(20)) {
                    ["hall", "stairs", "socket"].allSatisfy { Self.value(agent, $0, "switch_1") == false }
                }
                let events = agent.events.events(kinds: .link)
                let heard = Task {
                    var seen: [LinkPropagation] = []
                    for await case .linkPropagated(_, let propagation) in events {
                        seen.append(propagation)
                        if seen.count == 2 { break }
                    }
                    return seen
                }
                // Created while the agent runs: in effect for the very next report.
                try agent.createLink(DeviceLink(name: "stairway", members: [
                    DeviceLink.Member("hall:switch_1")!, DeviceLink.Member("stairs:switch_1")!,
                    DeviceLink.Member("socket:switch_1")!,
                ]))
                try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) {
                    Self.value(agent, "stairs", "switch_1") == true && Self.value(agent, "socket", "switch_1") == true
                }
                try await hall.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
                try await waitUntil(timeout: .seconds(20)) {
                    Self.value(agent, "stairs", "switch_1") == false && Self.value(agent, "socket", "switch_1") == false
                }
                try await Self.settle(agent, broker)

                #expect(stairs.sets == [#"{"switch_1":true}"#, #"{"switch_1":false}"#])
                #expect(socket.sets == [#"{"switch_1":true}"#, #"{"switch_1":false}"#])
                #expect(hall.sets.isEmpty, "the members' own reports of the link's values set nothing back")
                let statistics = agent.linkStatistics
                #expect(statistics.propagations == 2, "\(statistics)")
                #expect(statistics.setsSent == 4 && statistics.setsFailed == 0, "\(statistics)")
                #expect(agent.metricsText().contains(#"thing_agent_link_total{what="propagations"} 2"#))
                let propagations = await heard.value
                #expect(propagations.map(\.source) == ["hall:switch_1", "hall:switch_1"])
                #expect(propagations.map(\.value) == [true, false])
                #expect(propagations[0].sent == ["stairs:switch_1", "socket:switch_1"])
                for follower in [hall, stairs, socket] { await follower.stop() }
            }
        }
    }

    /// A member that reports the link's value before it answers: that report is the echo of the link's own set.
    @Test(.timeLimit(.minutes(2)))
    func theEchoOfTheLinksOwnSetIsNotPropagatedAndTheFirstReportEverIsNot() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                // `porch` has never reported switch_1: its first report is not a change.
                let porch = try await Self.device("porch", product: "p-light-1", properties: nil, broker)
                let garden = try await Self.device("garden", product: "p-light-1", broker, reportFirst: true)
                try await waitUntil(timeout: .seconds(20)) {
                    agent.cache.device("porch")?.online == true && Self.value(agent, "garden", "switch_1") == false
                }
                try agent.createLink(DeviceLink(name: "outside", members: [
                    DeviceLink.Member("porch:switch_1")!, DeviceLink.Member("garden:switch_1")!]))
                try await porch.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
                try await Self.settle(agent, broker)
                #expect(garden.sets.isEmpty, "a first report ever is not propagated")

                // A change, but garden has false already: no set.
                try await porch.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
                try await porch.device.properties(#"{"switch_1":true}"#, time: t0 + 30)
                try await waitUntil(timeout: .seconds(20)) { Self.value(agent, "garden", "switch_1") == true }
                try await porch.device.properties(#"{"switch_1":false}"#, time: t0 + 40)
                try await waitUntil(timeout: .seconds(20)) { garden.sets.count == 2 }
                try await waitUntil(timeout: .seconds(20)) { Self.value(agent, "garden", "switch_1") == false }
                try await Self.settle(agent, broker)
                #expect(garden.sets == [#"{"switch_1":true}"#, #"{"switch_1":false}"#])
                #expect(porch.sets.isEmpty)
                let statistics = agent.linkStatistics
                #expect(statistics.echoes == 2, "\(statistics)")
                #expect(statistics.propagations == 2, "\(statistics)")
                await porch.stop()
                await garden.stop()
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func offlineMembersAndValuesOutsideAMembersRangeAreSkippedCountedAndPublished() async throws {
        try await withBroker { broker in
            let feed = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/+/link")
            try await withAgent(broker, configure: useShippedModels) { agent in
                let dimmer = try await Self.device("dimmer", product: "p-light-1", properties: #"{"bright_value":100}"#, broker)
                let away = try await Self.device("away", product: "p-light-1", properties: #"{"bright_value":100}"#, broker)
                let timer = try await Self.device("timer", product: "p-plug-1", properties: #"{"countdown_1":0}"#, broker)
                try await away.device.status(false, time: t0 + 1)
                try await waitUntil(timeout: .seconds(20)) {
                    agent.cache.device("away")?.online == false && Self.value(agent, "timer", "countdown_1") == 0
                        && Self.value(agent, "dimmer", "bright_value") == 100
                }
                try agent.createLink(DeviceLink(name: "levels", members: [
                    DeviceLink.Member("dimmer:bright_value")!, DeviceLink.Member("away:bright_value")!,
                    DeviceLink.Member("timer:countdown_1")!]))
                // 300 is on the plug's step of 60; 310 is not.
                try await dimmer.device.properties(#"{"bright_value":300}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) { Self.value(agent, "timer", "countdown_1") == 300 }
                try await dimmer.device.properties(#"{"bright_value":310}"#, time: t0 + 20)
                try await Self.settle(agent, broker)
                #expect(timer.sets == [#"{"countdown_1":300}"#])
                #expect(away.sets.isEmpty)
                let statistics = agent.linkStatistics
                #expect(statistics.skippedOffline == 2 && statistics.outOfRange == 1, "\(statistics)")
                #expect(statistics.propagations == 2 && statistics.setsSent == 1, "\(statistics)")

                let published = try await feed.waitFor(count: 2, timeout: .seconds(20))
                #expect(published.map(\.topic) == ["thing-agent/events/dimmer/link", "thing-agent/events/dimmer/link"])
                let second = try JSONParser.parse(published[1].payload)
                #expect(second["event"] == "link")
                #expect(second["data"]?["link"] == "levels")
                #expect(second["data"]?["value"] == 310)
                #expect(second["data"]?["offline"] == ["away:bright_value"])
                #expect(second["data"]?["outOfRange"] == ["timer:countdown_1"])
                #expect(second["data"]?["sent"] == [])
                for follower in [dimmer, away, timer] { await follower.stop() }
            }
            await feed.stop()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func incompatibleCodesAreRefusedAtCreateAndNothingIsKept() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let lamp = try await Self.device("lamp", product: "p-light-1", broker)
                let plug = try await Self.device("plug", product: "p-plug-1", broker)
                let bare = try SimulatedDevice("bare", brokerURL: broker.url)
                try await bare.connect()
                try await bare.info(#"{"name":"no model"}"#, time: t0)
                try await waitUntil(timeout: .seconds(20)) {
                    ["lamp", "plug", "bare"].allSatisfy { agent.cache.device($0) != nil }
                }
                func refused(_ members: [String], _ expected: String) {
                    #expect {
                        try agent.createLink(DeviceLink(name: "x", members: members.compactMap(DeviceLink.Member.init)))
                    } throws: { error in
                        guard case EditError.modelRefused(let why) = error else { return false }
                        return why.contains(expected)
                    }
                }
                refused(["lamp:switch_1", "plug:countdown_1"], "plug:countdown_1 (value 0...86400 step 60) is not compatible with lamp:switch_1 (bool)")
                refused(["lamp:mode", "plug:relay_status"], "is not compatible")
                refused(["lamp:temp_current", "plug:cur_power"], "read-write codes")
                refused(["lamp:nosuch", "plug:switch_1"], "lamp:nosuch: unknown property")
                refused(["lamp:label", "plug:switch_1"], "string codes cannot be linked")
                refused(["lamp:switch_1", "bare:switch_1"], "no thing model for bare")
                #expect(throws: EditError.unknownDevice("ghost")) {
                    try agent.createLink(DeviceLink(name: "x", members: [DeviceLink.Member("lamp:switch_1")!,
                                                                         DeviceLink.Member("ghost:switch_1")!]))
                }
                #expect(throws: EditError.invalid("a link needs at least two DEVICE:CODE members")) {
                    try agent.createLink(DeviceLink(name: "x", members: [DeviceLink.Member("lamp:switch_1")!]))
                }
                #expect(throws: EditError.invalid("lamp:switch_1 is named twice")) {
                    try agent.createLink(DeviceLink(name: "x", members: ["lamp:switch_1", "plug:switch_1", "lamp:switch_1"]
                        .compactMap(DeviceLink.Member.init)))
                }
                // Through the API, as any service user would send it: more than 32 members is a 400, before any
                // member's device is looked up.
                let client = try AgentClient(configuration: agent.configuration)
                try await client.connect()
                let members = (0...32).map { DeviceLink.Member(deviceId: "d\($0)", code: "switch_1").json }
                #expect(members.count == 33)
                await #expect {
                    _ = try await client.call("links", JSONObject([("action", "create"), ("name", "big"),
                                                                   ("members", .array(members))]))
                } throws: { error in
                    guard case AgentClientError.refused(400, let message, _) = error else { return false }
                    return message.contains("a link has at most 32 members")
                }
                await client.disconnect()
                #expect(try agent.links().isEmpty)
                // Numbers with numbers, bools with bools: accepted, and a name is taken once.
                try agent.createLink(DeviceLink(name: "x", members: [DeviceLink.Member("lamp:bright_value")!,
                                                                     DeviceLink.Member("plug:countdown_1")!]))
                #expect(throws: EditError.linkExists("x")) {
                    try agent.createLink(DeviceLink(name: "x", members: [DeviceLink.Member("lamp:switch_1")!,
                                                                         DeviceLink.Member("plug:switch_1")!]))
                }
                #expect(try agent.links().map(\.name) == ["x"])
                try agent.deleteLink(named: "x")
                #expect(throws: EditError.unknownLink("x")) { try agent.deleteLink(named: "x") }
                await lamp.stop()
                await plug.stop()
                await bare.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aLinkSurvivesARestart() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let left = try await Self.device("left", product: "p-plug-1", broker)
            let right = try await Self.device("right", product: "p-plug-1", broker)
            try await withAgent(broker, directory: directory, configure: useShippedModels) { agent in
                // Info is retained and reached the agent; the earlier property reports did not.
                try await waitUntil(timeout: .seconds(20)) { agent.cache.device("right")?.info.productId == "p-plug-1" }
                try agent.createLink(DeviceLink(name: "pair", members: [DeviceLink.Member("left:child_lock")!,
                                                                        DeviceLink.Member("right:child_lock")!]))
            }
            try await withAgent(broker, directory: directory, configure: useShippedModels) { agent in
                #expect(try agent.links().map(\.name) == ["pair"])
                try await left.device.properties(#"{"child_lock":false}"#, time: t0 + 5)
                try await waitUntil(timeout: .seconds(20)) { Self.value(agent, "left", "child_lock") == false }
                try await left.device.properties(#"{"child_lock":true}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) { right.sets == [#"{"child_lock":true}"#] }
            }
            await left.stop()
            await right.stop()
        }
    }
}
