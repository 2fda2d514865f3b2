import Foundation
import JSON
import Testing
import TestSupport
import ThingAgent

/// What one API client can make the daemon do: a request is run once however often it arrives, a timeout is
/// bounded, one client holds at most its share of the requests in flight, and the CLI's own fan-out is paced to
/// the daemon's rate limit instead of refused by it. The real daemon, a real broker.
@Suite("API bounds: repeats, timeouts, shares, pacing")
struct APIBoundsTests {
    /// QoS 1 delivers at least once: a copy of a request (same client, same id) gets the first answer and does not
    /// run again. Creating a group twice would answer 409 the second time.
    @Test(.timeLimit(.minutes(2)))
    func aRequestThatComesAgainIsRunOnce() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let service = try await APIService(harness, name: "ops")
            let create = #""action":"create","name":"hall""#
            let first = try await service.call("group", id: "g1", create)
            #expect(first["code"] == 0, "\(first)")
            try await service.send("group", #"{"id":"g1","replyTo":"\#(service.replyTopic("g1"))",\#(create)}"#)
            let again = try await service.answer(on: service.replyTopic("g1"), count: 2)
            #expect(again == first, "a copy gets the first answer, not a second run's 409")
            let another = try await service.call("group", id: "g2", create)
            #expect(another["code"] == 409, "a new request is run: \(another)")
            try await InputGuardTests.waitForGuarded(harness, "apiRepeated", atLeast: 1)
            await service.disconnect()
        }
    }

    /// Reads and changes have a total budget each: a reader that spends all of its kind leaves an operator's
    /// change answered.
    @Test(.timeLimit(.minutes(2)))
    func aBusyReaderDoesNotSpendTheOperatorsBudget() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_API_RATE_LIMIT": "1000", "THING_AGENT_API_RATE_LIMIT_TOTAL": "0.01",
            ])
            try await harness.startDaemon()
            let reader = try await APIService(harness, name: "dashboard")
            let operators = try await APIService(harness, name: "ops")
            #expect(try await reader.call("devices", id: "r1")["code"] == 0)
            #expect(try await reader.call("health", id: "r2")["code"] == 429, "the reads' total is spent")
            let change = try await operators.call("group", id: "o1", #""action":"create","name":"hall""#)
            #expect(change["code"] == 0, "changes have a budget of their own: \(change)")
            #expect(try await operators.call("info", id: "o2", #""device":"x""#)["code"] == 429,
                    "an operator's read meets the spent reads' total")
            await reader.disconnect()
            await operators.disconnect()
        }
    }

    /// A timeout over `apiMaxTimeout` is refused with 400 before anything is sent.
    @Test(.timeLimit(.minutes(2)))
    func aTimeoutOverTheMaximumIsRefused() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_API_MAX_TIMEOUT": "60"])
            try await harness.startDaemon()
            let service = try await APIService(harness, name: "ops")
            let long = try await service.call("set", id: "s1", #""device":"lamp","data":{"switch_1":true},"timeout":1e9"#)
            #expect(long["code"] == 400, "\(long)")
            #expect(long["message"]?.stringValue?.contains("apiMaxTimeout") == true, "\(long)")
            let group = try await service.call("groupSet", id: "s2", #""group":"g","data":{"a":1},"timeout":61"#)
            #expect(group["code"] == 400, "\(group)")
            await service.disconnect()
        }
    }

    /// One client's requests to devices that never answer fill its own share (`apiInFlightPerClient`), not the
    /// daemon's whole `maxInFlight`: another client's request still goes out.
    @Test(.timeLimit(.minutes(2)))
    func oneClientCannotTakeAllTheRequestsInFlight() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_API_IN_FLIGHT_PER_CLIENT": "2", "THING_AGENT_MAX_IN_FLIGHT": "3",
            ])
            try await harness.startDaemon()
            let greedy = try await APIService(harness, name: "greedy")
            let other = try await APIService(harness, name: "other")
            // Nobody answers for these devices: each set waits out its timeout.
            let set = #""data":{"switch_1":true},"force":true,"timeout":6"#
            for n in 1...3 {
                let id = "a\(n)", replyTo = greedy.replyTopic("a\(n)")
                try await greedy.send("set", #"{"id":"\#(id)","replyTo":"\#(replyTo)","device":"silent\#(n)",\#(set)}"#)
            }
            let refused = try await waitForAnswer(greedy, among: ["a1", "a2", "a3"])
            #expect(refused["data"]?["error"]?["outcome"] == "tooManyInFlight", "\(refused)")
            #expect(refused["data"]?["error"]?["limit"] == 2, "the client's own limit: \(refused)")
            let elsewhere = try await other.call("set", id: "b1", #""device":"silent9","data":{"switch_1":true},"force":true,"timeout":1"#)
            #expect(elsewhere["data"]?["error"]?["outcome"] == "timeout", "sent, and timed out: \(elsewhere)")
            await greedy.disconnect()
            await other.disconnect()
        }
    }

    /// `scene run` through the daemon sends one set per action at once; over the daemon's rate limit the daemon
    /// answers 429 with `retryAfter`, and the CLI sends those again, paced, until every action is applied.
    @Test(.timeLimit(.minutes(3)))
    func aSceneLargerThanTheRateLimitRunsWhole() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_API_RATE_LIMIT": "3"])
            try await harness.startDaemon()
            let ids = (0..<12).map { "lamp\($0)" }
            var followers: [SetFollower] = []
            for id in ids {
                let device = try SimulatedDevice(id, brokerURL: broker.url)
                try await device.connect()
                try await device.status(true)
                let follower = SetFollower(device)
                try await follower.start()
                followers.append(follower)
            }
            try await waitUntil(timeout: .seconds(20)) {
                (try? await harness.stats())?["applied"]?.int64Value ?? 0 >= Int64(ids.count)
            }
            let actions = ids.map { #"{"device":"\#($0)","set":{"switch_1":true}}"# }.joined(separator: ",")
            let file = harness.directory + "/scenes.json"
            try #"{"scenes":[{"name":"all","actions":[\#(actions)]}]}"#.write(toFile: file, atomically: true, encoding: .utf8)
            let run = try await harness.cli(["scene", "run", "all", "--scenes", file], timeout: .seconds(60))
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(!run.stdout.contains("429") && !run.stderr.contains("429"), "\(run.stdout) \(run.stderr)")
            for follower in followers {
                #expect(follower.sets == [#"{"switch_1":true}"#], "\(follower.device.id): \(follower.sets)")
                await follower.stop()
            }
            try await InputGuardTests.waitForGuarded(harness, "apiRateLimited", atLeast: 1)
        }
    }

    /// The first answer to any of `ids`.
    private func waitForAnswer(_ service: APIService, among ids: [String]) async throws -> JSONObject {
        let topics = Set(ids.map(service.replyTopic))
        try await waitUntil(timeout: .seconds(10)) { service.messages.contains { topics.contains($0.topic) } }
        let message = try #require(service.messages.first { topics.contains($0.topic) })
        return try #require(try JSONParser.parse(message.payload).objectValue)
    }
}
