import Foundation
import JSON
import MQTT
import Synchronization
import ThingAgent

/// Property-set round trips against devices that answer on the broker: sequential latency, then throughput with
/// many requests in flight.
struct SetBenchmark {
    let brokerURL: String
    let directory: String

    func run(devices count: Int, sequential: Int, concurrent: Int) async throws
        -> (p50: Double, p99: Double, perSecond: Double) {
        var devices: [AnsweringDevice] = []
        for n in 0..<count { devices.append(try await AnsweringDevice("set\(n)", brokerURL: brokerURL)) }
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = brokerURL
        configuration.cache.database = directory + "/set-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let agent = try Agent(configuration: configuration, role: .standIn)
        try await agent.start()

        let clock = ContinuousClock()
        var latencies: [Double] = []
        for n in 0..<sequential {
            let start = clock.now
            _ = try await agent.request(.setProperties, to: "set\(n % count)", data: ["switch_1": .bool(n % 2 == 0)])
            let elapsed = clock.now - start
            latencies.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
        }
        let sorted = latencies.sorted()
        let seconds = try await Measure.seconds {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<concurrent {
                    group.addTask {
                        _ = try await agent.request(.setProperties, to: "set\(n % count)", data: ["bright_value": .integer(Int64(10 + n % 990))])
                    }
                }
                try await group.waitForAll()
            }
        }
        await agent.stop()
        for device in devices { await device.stop() }
        return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 99), Double(concurrent) / seconds)
    }

    /// `thing-agent set` as a whole process (start, connect, set, answer, exit), milliseconds p50 and p90.
    func cliSets(executable: String, runs: Int) async throws -> (p50: Double, p90: Double) {
        let device = try await AnsweringDevice("cli-set", brokerURL: brokerURL)
        let cache = directory + "/cli-set-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        var times: [Double] = []
        for n in 0..<(runs + 5) {
            let start = ContinuousClock.now
            let result = try await runProcess(executable, [
                "set", device.id, "switch_1=\(n % 2 == 0)", "--broker", brokerURL, "--db", cache])
            guard result.status == 0 else { throw BenchError("thing-agent set exited \(result.status): \(result.stderr)") }
            let elapsed = ContinuousClock.now - start
            if n >= 5 { times.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15) }
        }
        await device.stop()
        let sorted = times.sorted()
        return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 90))
    }
}
