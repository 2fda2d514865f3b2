import Foundation
import JSON
import Testing
import TestSupport
import ThingAgent

/// Round-trip time of a property set (publish, device answers, outcome back), off by default. Run in release:
///   SET_BENCH=1 swift test -c release --filter SetRoundTripBenchmark
/// SET_BENCH_N sets the number of sequential sets (default 2000).
@Suite("Set round-trip benchmark", .enabled(if: ProcessInfo.processInfo.environment["SET_BENCH"] == "1"), .serialized)
struct SetRoundTripBenchmark {
    static var count: Int { Int(ProcessInfo.processInfo.environment["SET_BENCH_N"] ?? "") ?? 2000 }

    static func report(_ name: String, _ samples: [Duration]) {
        let sorted = samples.sorted()
        func percentile(_ p: Double) -> String {
            let sample = sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
            return String(format: "%.3f ms", Double(sample.components.attoseconds) / 1e15
                          + Double(sample.components.seconds) * 1000)
        }
        print("benchmark \(name): n=\(sorted.count) p50=\(percentile(0.50)) p90=\(percentile(0.90)) "
              + "p99=\(percentile(0.99)) max=\(percentile(1.0))")
    }

    @Test(.timeLimit(.minutes(5)))
    func sequentialSetsInProcess() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = AgentConfiguration()
            configuration.broker = broker.url
            configuration.database = directory + "/cache.sqlite"
            configuration.clientID = "bench-\(UInt32.random(in: 0...UInt32.max))"
            configuration.modelsDirectory = repositoryRoot + "/Config/models"
            let agent = try Agent(configuration: configuration)
            let running = Task { try await agent.run() }
            try await waitUntil(timeout: .seconds(30)) { agent.connectionState == .connected }
            let device = try SimulatedDevice("bf12ab", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"productId":"p-light-1"}"#, time: t0)
            try await device.status(true, time: t0)
            try await waitUntil { agent.thingModel(for: "bf12ab") != nil && agent.cache.device("bf12ab")?.online == true }
            let answering = try await device.answer("properties/set") { _ in #""code":0"# }

            let clock = ContinuousClock()
            var samples: [Duration] = []
            for n in 0..<(Self.count + 100) {
                let started = clock.now
                try await agent.setProperties(deviceId: "bf12ab", ["bright_value": .integer(Int64(10 + n % 990)),
                                                                   "switch_1": true])
                if n >= 100 { samples.append(clock.now - started) }   // the first 100 warm up
            }
            Self.report("set round trip (in process, validated, QoS 1 both ways)", samples)
            answering.cancel()
            await device.disconnect()
            running.cancel()
            _ = try? await running.value
        }
    }

    @Test(.timeLimit(.minutes(5)))
    func cliSetsEndToEnd() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let device = try SimulatedDevice("bf12ab", brokerURL: broker.url)
            try await device.connect()
            let answering = try await device.answer("properties/set") { _ in #""code":0"# }
            var samples: [Duration] = []
            let clock = ContinuousClock()
            for n in 0..<50 {
                let started = clock.now
                let status = try await Self.run(thingAgentExecutable(), [
                    "set", "bf12ab", "switch_1=true", "--broker", broker.url, "--db", directory + "/cache.sqlite"])
                #expect(status == 0)
                if n >= 5 { samples.append(clock.now - started) }
            }
            Self.report("thing-agent set (process start, connect, set, exit)", samples)
            answering.cancel()
            await device.disconnect()
        }
    }

    /// Runs a process to its end, woken by its exit (not by polling, which would blur the figures).
    static func run(_ executable: String, _ arguments: [String]) async throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
    }
}
