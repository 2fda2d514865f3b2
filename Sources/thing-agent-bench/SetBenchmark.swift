import Foundation
import JSON
import MQTT
import Synchronization
import TestSupport
import ThingAgent

/// Property-set round trips against devices that answer on the broker: sequential latency, then throughput with
/// many requests in flight.
struct SetBenchmark {
    let brokerURL: String
    let directory: String

    func run(devices count: Int, sequential: Int, concurrent: Int) async throws
        -> (p50: Double, p99: Double, perSecond: Double) {
        let devices = try (0..<count).map { try SimulatedDevice("set\($0)", brokerURL: brokerURL) }
        var answering: [Task<Void, Never>] = []
        for device in devices {
            try await device.connect()
            answering.append(try await device.answer("properties/set") { _ in "\"code\":0" })
        }
        var configuration = AgentConfiguration()
        configuration.broker = brokerURL
        configuration.database = directory + "/set-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let agent = try Agent(configuration: configuration, role: .requester)
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
        answering.forEach { $0.cancel() }
        for device in devices { await device.disconnect() }
        return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 99), Double(concurrent) / seconds)
    }
}
