import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The receive-path counters: every message counted once, and what the daemon writes for `thing-agent stats`.
/// An agent with a cache file and no broker (`withUnstartedAgent`): messages go in through `receive`, as the network
/// thread hands them.
@Suite("Receive-path counters")
struct StatisticsTests {
    static func message(_ topic: String, _ payload: String) -> MQTTMessage {
        MQTTMessage(topic: topic, payload: Array(payload.utf8), qos: .atLeastOnce)
    }

    @Test func everyMessageEndsInExactlyOneOutcome() async throws {
        try await withUnstartedAgent { agent, _ in
            let inputs: [(String, String)] = [
                ("things/d1/thing/properties", #"{"time":1764450000000,"data":{"a":1}}"#),          // applied
                ("things/d1/thing/properties", #"{"time":1764450000000,"data":{"a":1}}"#),          // repeat
                ("things/d1/thing/properties", #"{"time":1764449000000,"data":{"a":0}}"#),          // stale
                ("things/d1/thing/properties", #"{"data":"#),                                       // malformed
                ("things/bad id/thing/properties", #"{"data":{"a":2}}"#),                          // invalid id
                ("things/d1/thing/properties", "{\"data\":{\"x\":\"" + String(repeating: "x", count: 300_000) + "\"}}"),
                ("things/d1/thing/properties/set_response", #"{"msgId":"nobody","code":0}"#),      // for others
                ("things/d1/thing/wifi/scan_response", #"{"msgId":"nobody","code":1006}"#),        // for others
                // An info/get answer nobody waits for still carries information: it is applied, not dropped.
                ("things/d1/thing/info/get_response", #"{"msgId":"nobody","code":0,"data":{"name":"n"}}"#),
                ("things/d1/thing/info/get_response", #"{"msgId":"nobody","code":0,"data":{"name":"n"}}"#),
            ]
            for (topic, payload) in inputs { agent.receive(Self.message(topic, payload)) }
            let msgId = try agent.tracker.register(deviceId: "d1", kind: .setProperties)
            agent.receive(Self.message("things/d1/thing/properties/set_response", #"{"msgId":"\#(msgId)","code":0}"#))

            let stats = agent.statistics
            #expect(stats.received == inputs.count + 1)
            #expect(stats.received == stats.applied + stats.unchanged + stats.forOtherClients + stats.droppedTotal)
            #expect(stats.received == stats.outcomes)
            #expect(stats.applied == 2)
            #expect(stats.unchanged == 4)  // repeat, stale, the repeated info answer, the matched answer
            #expect(stats.forOtherClients == 2)
            #expect(stats.dropped == [.malformed: 1, .invalidDeviceID: 1, .oversized: 1])
        }
    }

    /// docs/protocol.md: a message of the wrong shape is dropped whatever its time, not passed over as stale.
    @Test func staleInfoOfTheWrongShapeIsCountedAsMalformed() async throws {
        try await withUnstartedAgent { agent, _ in
            agent.receive(Self.message("things/d1/thing/info", #"{"time":1764450000000,"data":{"name":"Hall"}}"#))
            agent.receive(Self.message("things/d1/thing/info", #"{"time":1764440000000,"data":{"name":42}}"#))
            agent.receive(Self.message("things/d1/thing/info", #"{"time":1764440000000,"data":{"wifiSignal":-999}}"#))
            agent.receive(Self.message("things/d1/thing/info", #"{"time":1764440000000,"data":{"name":"Old"}}"#))
            #expect(agent.statistics.dropped == [.malformed: 2])
            #expect(agent.statistics.applied == 1)
            #expect(agent.statistics.unchanged == 1)
            #expect(agent.cache.device("d1")?.info.name == "Hall")
        }
    }

    @Test func theDaemonWritesItsCountersIntoTheCacheFile() async throws {
        try await withUnstartedAgent { agent, _ in
            let path = agent.configuration.cache.database
            // At start: zeros, counted from now.
            let initial = try #require(try CacheReader(path: path).statistics())
            #expect(initial.statistics == IngestStatistics())
            #expect(abs(initial.since - Timestamp.current) < 60_000)

            agent.receive(Self.message("things/d1/thing/properties", #"{"data":{"a":1}}"#))
            agent.receive(Self.message("things/d1/thing/status", #"{"status":"sleepy"}"#))
            agent.receive(Self.message("things/d-é/thing/status", #"{"status":"online"}"#))
            await agent.stop()  // the last flush writes the counters
            let stored = try #require(try CacheReader(path: path).statistics())
            #expect(stored.statistics == agent.statistics)
            #expect(stored.statistics.received == 3)
            #expect(stored.statistics.dropped == [.malformed: 1, .invalidDeviceID: 1])
            #expect(stored.since == initial.since)
        }
    }

    @Test func aCacheNoDaemonRanOnHasNoCounters() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        _ = try Agent(configuration: configuration, role: .standIn)
        #expect(try CacheReader(path: configuration.cache.database).statistics() == nil)
    }
}
