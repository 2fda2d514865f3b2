import Foundation
import MQTT
import Synchronization
import ThingAgent

/// Publish-to-listener latency at a fixed offered rate: a device publishes QoS 1 property reports on a fixed
/// schedule, each carrying its sequence number; a fleet listener in the agent notes when each arrives.
struct LatencyBenchmark {
    let brokerURL: String
    let directory: String

    func run(rate: Int, seconds: Double) async throws -> (p50: Double, p99: Double, p999: Double, received: Int) {
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = brokerURL
        configuration.cache.database = directory + "/latency-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        configuration.mqtt.clientID = "bench-latency-\(UInt32.random(in: 0...UInt32.max))"
        let agent = try Agent(configuration: configuration)
        try await agent.start()

        let total = Int(Double(rate) * seconds)
        let clock = ContinuousClock()
        let sent = Mutex([ContinuousClock.Instant?](repeating: nil, count: total))
        let latencies = Mutex<[Double]>([])
        latencies.withLock { $0.reserveCapacity(total) }
        let token = agent.events.addListener(kinds: .properties) { event in
            let arrived = clock.now
            guard case .propertiesChanged(_, let changes) = event,
                  let seq = changes.first(where: { $0.code == "seq" })?.value.int64Value,
                  let start = sent.withLock({ $0[Int(seq)] }) else { return }
            let elapsed = arrived - start
            latencies.withLock { $0.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6) }
        }

        let publisher = try MQTTClient(configuration: MQTTConfiguration(url: brokerURL, clientID: "bench-lat-pub"),
                                       streamMessages: false)
        try await publisher.connect()
        let interval = Duration.seconds(1) / rate
        let begin = clock.now
        for n in 0..<total {
            let due = begin + interval * n
            if due > clock.now { try await Task.sleep(until: due, clock: clock) }
            let payload = Array("{\"time\":\(1_764_450_000_000 + Int64(n)),\"data\":{\"seq\":\(n)}}".utf8)
            sent.withLock { $0[n] = clock.now }
            Task { try? await publisher.publish("things/lat\(n % 100)/thing/properties", payload: payload, qos: .atLeastOnce) }
        }
        try await Task.sleep(for: .milliseconds(500))
        token.cancel()
        await publisher.disconnect()
        await agent.stop()
        let sorted = latencies.withLock { $0 }.sorted()
        return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 99), Measure.percentile(sorted, 99.9), sorted.count)
    }
}
