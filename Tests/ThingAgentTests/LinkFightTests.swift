import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Members that answer a link's set with another value of their own: the link must not chase them for good.
@Suite("Multi-control links: value fights", .serialized)
struct LinkFightTests {
    /// Two members that each report one more than they were set to: without a stop, every report sets the other
    /// member and the pair runs at a thousand sets a second. After `LinkFight.strikes` contradictions the
    /// link pauses; it is counted, in the metrics too, and no more sets go out.
    @Test(.timeLimit(.minutes(2)))
    func twoMembersThatAnswerEverySetWithAnotherValuePauseTheLink() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: useShippedModels) { agent in
                // Each member reports one more than it was set to (a dimmer that drifts).
                let drift: @Sendable (String) -> String = { data in
                    let digits = data.filter(\.isNumber)
                    return #"{"bright_value":\#((Int(digits) ?? 0) + 1)}"#
                }
                let hall = try await LinkTests.device("hall", product: "p-light-1", properties: #"{"bright_value":10}"#,
                                                      broker, rewrite: drift)
                let stairs = try await LinkTests.device("stairs", product: "p-light-1",
                                                        properties: #"{"bright_value":10}"#, broker, rewrite: drift)
                try await waitUntil(timeout: .seconds(20)) {
                    ["hall", "stairs"].allSatisfy { LinkTests.value(agent, $0, "bright_value") == 10 }
                }
                try agent.createLink(DeviceLink(name: "stairway", members: [
                    DeviceLink.Member("hall:bright_value")!, DeviceLink.Member("stairs:bright_value")!,
                ]))
                try await hall.device.properties(#"{"bright_value":100}"#, time: t0 + 10)
                try await waitUntil(timeout: .seconds(20)) { agent.linkStatistics.fights >= 1 }
                try await LinkTests.settle(agent, broker)
                let atPause = hall.sets.count + stairs.sets.count
                #expect(atPause <= LinkFight.strikes + 1, "a few rounds, then the pause: \(hall.sets) \(stairs.sets)")
                // Paused: more reports from either member set nothing.
                try await stairs.device.properties(#"{"bright_value":500}"#, time: t0 + 20)
                try await LinkTests.settle(agent, broker)
                try await Task.sleep(for: .milliseconds(500))
                #expect(hall.sets.count + stairs.sets.count == atPause, "\(hall.sets) \(stairs.sets)")
                let statistics = agent.linkStatistics
                #expect(statistics.fights == 1 && statistics.paused >= 1, "\(statistics)")
                #expect(agent.metricsText().contains(#"thing_agent_link_total{what="fights"} 1"#))
                for follower in [hall, stairs] { await follower.stop() }
            }
        }
    }

    /// The pure rule: strikes within the window make a fight, the pause ends, old strikes are forgotten.
    @Test func strikesWithinTheWindowPauseForAWhile() {
        var fight = LinkFight()
        let start = ContinuousClock.now
        let paused = start + LinkFight.window + .seconds(2)
        let strikes = [start, start + LinkFight.window, start + LinkFight.window + .seconds(1), paused,
                       paused + .seconds(1)].map { fight.contradicted(now: $0) }
        // The first strike is past the window by the second; the third within it is the fight; none while paused.
        #expect(strikes == [false, false, false, true, false])
        #expect(fight.isPaused(now: paused + .seconds(1)))
        #expect(!fight.isPaused(now: paused + LinkFight.pause))
    }
}
