import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Multi-control links under fast changes, silent devices and mixed number forms: a daemon-role agent, followers on
/// a real broker, a real cache file (`LinkTests` has the set-up).
@Suite("Multi-control links under fast changes", .serialized)
struct LinkBurstTests {


    /// Waits until the links expect nothing more of these members (every set sent came back or ended), and
    /// everything published before reached the agent.
    static func settled(_ agent: Agent, _ members: [String], _ broker: MosquittoBroker) async throws {
        try await LinkTests.settle(agent, broker)
        try await waitUntil(timeout: .seconds(30)) {
            members.allSatisfy { agent.linkEngine.isSettled(linked($0)) }
        }
        try await LinkTests.settle(agent, broker)
    }

    @Test(.timeLimit(.minutes(2)))
    func rapidTogglesEndWithEveryMemberOnTheLastValueAndNothingSetBack() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let hall = try await LinkTests.device("hall", product: "p-light-1", broker)
                let stairs = try await LinkTests.device("stairs", product: "p-light-1", broker)
                let porch = try await LinkTests.device("porch", product: "p-plug-1", broker)
                let ids = ["hall", "stairs", "porch"]
                try await waitUntil(timeout: .seconds(20)) {
                    ids.allSatisfy { LinkTests.value(agent, $0, "switch_1") == false }
                }
                try agent.createLink(DeviceLink(name: "stairway", members: ids.map { linked("\($0):switch_1") }))
                // On then off within one round trip: the followers must end off.
                try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
                try await hall.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
                try await Self.settled(agent, ids.map { "\($0):switch_1" }, broker)
                for id in ids { #expect(LinkTests.value(agent, id, "switch_1") == false, "\(id)") }
                // On, off, on: the followers end on.
                try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 30)
                try await hall.device.properties(#"{"switch_1":false}"#, time: t0 + 40)
                try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 50)
                try await Self.settled(agent, ids.map { "\($0):switch_1" }, broker)
                for id in ids { #expect(LinkTests.value(agent, id, "switch_1") == true, "\(id)") }
                #expect(hall.sets.isEmpty, "the followers' reports set nothing back on the member that changed")
                for follower in [stairs, porch] {
                    #expect(follower.sets.last == #"{"switch_1":true}"#, "\(follower.sets)")
                }
                for follower in [hall, stairs, porch] { await follower.stop() }
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aDimmerBurstEndsWithEveryMemberOnItsLastValue() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let ids = ["dimmer", "lamp", "spot"]
                var followers: [SetFollower] = []
                for id in ids {
                    followers.append(try await LinkTests.device(id, product: "p-light-1",
                                                                properties: #"{"bright_value":100}"#, broker))
                }
                try await waitUntil(timeout: .seconds(20)) {
                    ids.allSatisfy { LinkTests.value(agent, $0, "bright_value") == 100 }
                }
                try agent.createLink(DeviceLink(name: "levels", members: ids.map { linked("\($0):bright_value") }))
                for (step, level) in [10, 20, 30, 40, 50].enumerated() {
                    try await followers[0].device.properties(#"{"bright_value":\#(level)}"#, time: t0 + 10 * Int64(step + 1))
                }
                try await Self.settled(agent, ids.map { "\($0):bright_value" }, broker)
                for id in ids { #expect(LinkTests.value(agent, id, "bright_value") == 50, "\(id)") }
                #expect(followers[0].sets.isEmpty, "the dimmer was set back: \(followers[0].sets)")
                for follower in followers.dropFirst() {
                    // In order, never back: each set a later level than the one before, the last one 50.
                    let levels = follower.sets.compactMap { try? JSONParser.parse($0)["bright_value"]?.int64Value }
                    #expect(levels == levels.sorted() && Set(levels).count == levels.count, "\(follower.sets)")
                    #expect(levels.last == 50, "\(follower.sets)")
                }
                let statistics = agent.linkStatistics
                #expect(statistics.propagations == 5, "\(statistics)")
                #expect(statistics.setsFailed == 0, "\(statistics)")
                for follower in followers { await follower.stop() }
            }
        }
    }

    /// A device that answers code 0 and keeps its state: its set is not expected for good.
    @Test(.timeLimit(.minutes(2)))
    func anAcceptedSetNeverReportedDoesNotBlockTheMemberLater() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let wall = try await LinkTests.device("wall", product: "p-light-1", broker)
                let locked = try await LinkTests.device("locked", product: "p-plug-1", broker, reports: false)
                try await waitUntil(timeout: .seconds(20)) {
                    ["wall", "locked"].allSatisfy { LinkTests.value(agent, $0, "switch_1") == false }
                }
                try agent.createLink(DeviceLink(name: "pair", members: [linked("wall:switch_1"),
                                                                        linked("locked:switch_1")]))
                try await wall.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) { locked.sets == [#"{"switch_1":true}"#] }
                // The grace after its answer runs out (the request timeout, at least 5 s): no longer expected.
                try await waitUntil(timeout: .seconds(30)) { agent.linkEngine.isSettled(linked("locked:switch_1")) }
                // Still off by its own word: off needs no set, on gets one again.
                try await wall.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
                try await wall.device.properties(#"{"switch_1":true}"#, time: t0 + 30)
                try await waitUntil(timeout: .seconds(20)) { locked.sets.count == 2 }
                try await LinkTests.settle(agent, broker)
                #expect(locked.sets == [#"{"switch_1":true}"#, #"{"switch_1":true}"#])
                #expect(wall.sets.isEmpty)
                let statistics = agent.linkStatistics
                #expect(statistics.expired + statistics.setsFailed >= 1, "\(statistics)")
                await wall.stop()
                await locked.stop()
            }
        }
    }

    /// One member reports `20`, the other `20.0`: the same value.
    @Test(.timeLimit(.minutes(2)))
    func numbersAreComparedByValue() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                let whole = try await LinkTests.device("whole", product: "p-light-1",
                                                       properties: #"{"bright_value":100}"#, broker)
                let halves = try await LinkTests.device("halves", product: "p-light-1",
                                                        properties: #"{"bright_value":100.0}"#, broker,
                                                        rewrite: { $0.replacingOccurrences(of: "}", with: ".0}") })
                try await waitUntil(timeout: .seconds(20)) {
                    LinkTests.value(agent, "whole", "bright_value") == 100
                        && LinkTests.value(agent, "halves", "bright_value") == .double(100)
                }
                try agent.createLink(DeviceLink(name: "heat", members: [linked("whole:bright_value"),
                                                                        linked("halves:bright_value")]))
                try await whole.device.properties(#"{"bright_value":20}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) {
                    LinkTests.value(agent, "halves", "bright_value") == .double(20)
                }
                // 20.0 after 20 is no change; halves' own 40.0 reaches whole as the integer 40.
                try await whole.device.properties(#"{"bright_value":20.0}"#, time: t0 + 20)
                // Later than halves' own report of the set (the follower stamps it with the moment).
                try await halves.device.properties(#"{"bright_value":40.0}"#, time: Int64(Date().timeIntervalSince1970 * 1000) + 1000)
                try await waitUntil(timeout: .seconds(20)) { LinkTests.value(agent, "whole", "bright_value") == 40 }
                try await Self.settled(agent, ["whole:bright_value", "halves:bright_value"], broker)
                #expect(halves.sets == [#"{"bright_value":20}"#])
                #expect(whole.sets == [#"{"bright_value":40}"#])
                let statistics = agent.linkStatistics
                #expect(statistics.propagations == 2 && statistics.echoes == 2, "\(statistics)")
                #expect(statistics.outOfRange == 0, "\(statistics)")
                await whole.stop()
                await halves.stop()
            }
        }
    }
}

private func linked(_ text: String) -> DeviceLink.Member { DeviceLink.Member(text)! }
