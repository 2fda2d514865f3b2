import Foundation
import JSON
import Testing
import TestSupport

/// `set --group`'s exit code when members fail in different ways: 0 only when every sent set succeeded, else the
/// first of 3 (a model refused), 4 (a device refused), 5 (no answer), 6 (not sent), else 1.
@Suite("thing-agent set --group exit codes", .serialized)
struct GroupSetExitCodeTests {
    /// An online device of `product` that answers every set with code 1, "busy".
    static func refuser(_ id: String, product: String, _ broker: MosquittoBroker) async throws
        -> (SimulatedDevice, Task<Void, Never>) {
        let device = try await Self.device(id, product: product, broker)
        let answering = try await device.answer("properties/set") { _ in #""code":1,"message":"busy""# }
        return (device, answering)
    }

    /// An online device of `product` that never answers.
    static func device(_ id: String, product: String, _ broker: MosquittoBroker) async throws -> SimulatedDevice {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        try await device.info(#"{"name":"\#(id)","productId":"\#(product)"}"#, time: t0)
        try await device.status(true, time: t0)
        return device
    }

    static func outcomes(_ result: ProcessResult) throws -> [String] {
        try JSONParser.parse(result.stdout)["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?.stringValue } ?? []
    }

    @Test(.timeLimit(.minutes(3)))
    func aRefusingMemberIs4AlsoBesideASilentOneAndAModelRefusalIs3BesideARefusingOne() async throws {
        try await ScenesGroupsLinksTests.withDaemon { broker, harness, config in
            let lamp = try await ScenesGroupsLinksTests.follower("lamp", product: "p-light-1", broker)
            let plug = try await ScenesGroupsLinksTests.follower("plug", product: "p-plug-1", broker)
            let (busy, answering) = try await Self.refuser("busy", product: "p-light-1", broker)
            let silent = try await Self.device("silent", product: "p-light-1", broker)
            for id in ["lamp", "plug", "busy", "silent"] {
                _ = try await harness.waitForInfo(id) { $0["online"] == true && $0["productId"] != nil }
            }
            for (group, members) in [("pair", ["lamp", "busy"]), ("mixed", ["busy", "silent"]), ("wrong", ["plug", "busy"])] {
                #expect(try await harness.cli(["group", "create", group] + members).status == 0)
            }

            // One member refuses, the other applies it.
            let refused = try await harness.cli(["set", "--group", "pair", "switch_1=true"] + config)
            #expect(refused.status == 4, "\(refused.stdout) \(refused.stderr)")
            #expect(refused.stdout.contains("group pair: 1 of 2 sets applied"), "\(refused.stdout)")
            #expect(refused.stdout.contains("refused") && refused.stdout.contains("busy"), "\(refused.stdout)")
            try await waitUntil(timeout: .seconds(20)) { lamp.sets == [#"{"switch_1":true}"#] }

            // A refusal and a silence: the refusal's 4 wins over the timeout's 5, with text and JSON alike.
            for json in [false, true] {
                // Long enough for the busy lamp's refusal to come in time under load.
                let mixed = try await harness.cli(["set", "--group", "mixed", "switch_1=true", "--timeout", "4"]
                                                  + (json ? ["--json"] : []) + config)
                #expect(mixed.status == 4, "\(mixed.stdout) \(mixed.stderr)")
                if json {
                    #expect(try Self.outcomes(mixed) == ["refused", "timeout"], "\(mixed.stdout)")
                } else {
                    #expect(mixed.stdout.contains("timeout") && mixed.stdout.contains("refused"), "\(mixed.stdout)")
                }
            }

            // The busy lamp refuses bright_value (4), the plug's model has none (3): 3 wins, whatever the order.
            let wrong = try await harness.cli(["set", "--group", "wrong", "bright_value=300", "--json"] + config)
            #expect(wrong.status == 3, "\(wrong.stdout) \(wrong.stderr)")
            #expect(try Self.outcomes(wrong) == ["refused", "invalid"], "\(wrong.stdout)")
            #expect(plug.sets.isEmpty)
            answering.cancel()
            for device in [busy, silent] { await device.disconnect() }
            for follower in [lamp, plug] { await follower.stop() }
        }
    }

    /// The daemon's limit of requests waiting for answers (`maxInFlight`) is an action that failed (1), for one
    /// device and for a group: the broker is there, and "no broker" (6) would send the operator after it.
    @Test(.timeLimit(.minutes(3)))
    func tooManyRequestsInFlightIs1NotNoBroker() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let config = try ScenesGroupsLinksTests.config(harness)
            try await harness.startDaemon(config, environment: ["THING_AGENT_MAX_IN_FLIGHT": "1"])
            let lamp = try await ScenesGroupsLinksTests.follower("lamp", product: "p-light-1", broker)
            let silent = try await Self.device("silent", product: "p-light-1", broker)
            for id in ["lamp", "silent"] {
                _ = try await harness.waitForInfo(id) { $0["online"] == true && $0["productId"] != nil }
            }
            #expect(try await harness.cli(["group", "create", "hall", "lamp"]).status == 0)
            let asked = try await TopicRecorder.start(broker.url, filter: silent.topic("properties/set"))

            // The silent device's set holds the one place until its timeout.
            async let holding = harness.cli(["set", "silent", "switch_1=true", "--timeout", "25"] + config)
            try await asked.waitFor(count: 1, timeout: .seconds(20))
            let group = try await harness.cli(["set", "--group", "hall", "switch_1=true", "--json"] + config)
            #expect(group.status == 1, "\(group.stdout) \(group.stderr)")
            #expect(try Self.outcomes(group) == ["tooManyInFlight"], "\(group.stdout)")
            let one = try await harness.cli(["set", "lamp", "switch_1=true"] + config)
            #expect(one.status == 1, "\(one.stdout) \(one.stderr)")
            #expect(lamp.sets.isEmpty)
            #expect(try await holding.status == 5)
            await asked.stop()
            await silent.disconnect()
            await lamp.stop()
        }
    }
}
