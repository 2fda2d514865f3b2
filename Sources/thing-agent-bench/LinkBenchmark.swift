import Foundation
import JSON
import MQTT
import Synchronization
import ThingAgent

/// Report-to-set latency through a multi-control link: a member's property report is published, and the clock
/// stops when the other member's set arrives on the broker. The target answers and reports the value back, as
/// firmware does (so the link also handles its echo every round).
struct LinkBenchmark {
    let brokerURL: String
    let directory: String

    func run(rounds: Int) async throws -> (p50: Double, p99: Double) {
        let models = directory + "/link-models"
        try FileManager.default.createDirectory(atPath: models, withIntermediateDirectories: true)
        try #"{"productId":"p-bench-switch","properties":[{"code":"switch_1","type":"bool","access":"rw"}]}"#
            .write(toFile: models + "/p-bench-switch.json", atomically: true, encoding: .utf8)
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = brokerURL
        configuration.cache.database = directory + "/link-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        configuration.mqtt.clientID = "bench-link-\(UInt32.random(in: 0...UInt32.max))"
        configuration.modelsDirectory = models
        configuration.events.publish = false
        let agent = try Agent(configuration: configuration)
        let subscribed = Atomic<Bool>(false)
        let running = Task { try await agent.run(onStarted: { subscribed.store(true, ordering: .relaxed) }) }
        defer { running.cancel() }
        while !subscribed.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(10)) }

        let source = try await client("link-source")
        let target = try await client("link-target")
        for (device, mqtt) in [("link-source", source), ("link-target", target)] {
            try await mqtt.publish("things/\(device)/thing/info", payload: Self.payload(#"{"productId":"p-bench-switch"}"#),
                                   qos: .atLeastOnce, retain: true)
            try await mqtt.publish("things/\(device)/thing/properties", payload: Self.payload(#"{"switch_1":false}"#),
                                   qos: .atLeastOnce)
        }
        while agent.cache.device("link-target")?.properties["switch_1"] == nil
            || agent.cache.device("link-source")?.properties["switch_1"] == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        try agent.createLink(DeviceLink(name: "bench", members: [
            DeviceLink.Member(deviceId: "link-source", code: "switch_1"),
            DeviceLink.Member(deviceId: "link-target", code: "switch_1")]))

        let arrivals = Mutex<[ContinuousClock.Instant]>([])
        let setTopic = "things/link-target/thing/properties/set"
        let stream = target.messages
        try await target.subscribe(setTopic, qos: .atLeastOnce)
        let following = Task {
            for await message in stream where message.topic == setTopic {
                let now = ContinuousClock.now
                arrivals.withLock { $0.append(now) }
                guard let set = try? JSONParser.parse(message.payload), let msgId = set["msgId"], let data = set["data"]
                else { continue }
                let time = Self.reportTime()
                try? await target.publish(setTopic + "_response", payload: JSONValue.object(JSONObject([
                    ("msgId", msgId), ("time", .integer(time)), ("code", 0)])).serializedBytes(), qos: .atLeastOnce)
                try? await target.publish("things/link-target/thing/properties", payload: JSONValue.object(JSONObject([
                    ("time", .integer(time)), ("data", data)])).serializedBytes(), qos: .atLeastOnce)
            }
        }
        var latencies: [Double] = []
        for round in 0..<rounds {
            let value = round % 2 == 0
            let start = ContinuousClock.now
            try await source.publish("things/link-source/thing/properties",
                                     payload: Self.payload(#"{"switch_1":\#(value)}"#), qos: .atLeastOnce)
            while arrivals.withLock({ $0.count }) <= round { try await Task.sleep(for: .microseconds(50)) }
            let elapsed = arrivals.withLock { $0[round] } - start
            latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
            // The echo is back in the cache before the next round: each round measures one propagation alone.
            while agent.cache.device("link-target")?.properties["switch_1"]?.value != .bool(value) {
                try await Task.sleep(for: .microseconds(50))
            }
        }
        following.cancel()
        await source.disconnect()
        await target.disconnect()
        running.cancel()
        _ = try? await running.value
        let sorted = latencies.sorted()
        return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 99))
    }

    private func client(_ name: String) async throws -> MQTTClient {
        let client = try MQTTClient(configuration: MQTTConfiguration(
            url: brokerURL, clientID: "bench-\(name)-\(UInt32.random(in: 0...UInt32.max))"))
        try await client.connect()
        return client
    }

    private static func payload(_ data: String) -> [UInt8] {
        Array(#"{"time":\#(reportTime()),"data":\#(data)}"#.utf8)
    }

    private static let lastTime = Mutex<Int64>(0)

    /// The clock in milliseconds, but always later than the last report's: two reports in one millisecond would
    /// make the second a repeat (stale values lose), and the round would wait for nothing.
    private static func reportTime() -> Int64 {
        lastTime.withLock { last in
            last = max(Int64(Date().timeIntervalSince1970 * 1000), last + 1)
            return last
        }
    }
}
