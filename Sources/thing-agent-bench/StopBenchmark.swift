import Foundation
import JSON

/// How long a graceful stop takes while the daemon drains a backlog: SIGTERM to the process's exit, with QoS 1
/// reports still queued for its persistent session (they wait at the broker for the next start). The README's
/// promise about stopping quotes this figure; the tests only check that a stop ends and is clean.
struct StopBenchmark {
    let broker: BenchBroker
    let directory: String
    /// The `thing-agent` executable built beside the bench.
    let thingAgent: String

    struct Figures {
        /// SIGTERM to exit, in milliseconds, one per round, sorted.
        var milliseconds: [Double]
        /// Reports the daemon had received when it stopped, one per round, sorted: fewer than the backlog shows
        /// that the stop came in the middle of the drain.
        var received: [Int]
    }

    /// `rounds` stops, each of a fresh daemon `settle` after it subscribed to a backlog of `backlog` reports.
    func run(rounds: Int, backlog: Int, settle: Duration = .milliseconds(300)) async throws -> Figures {
        var times: [Double] = [], received: [Int] = []
        for round in 1...rounds {
            let path = directory + "/stop-\(round).sqlite"
            let arguments = ["run", "--broker", broker.url, "--db", path,
                             "--client-id", "bench-stop-\(UInt32.random(in: 0...UInt32.max))"]
            // The first start makes the persistent session; the backlog is queued for it while no daemon runs.
            let first = try await started(arguments, log: path + ".log-1")
            try await stop(first)
            try await Publisher(url: broker.url).publish(propertyReports(count: backlog, devices: 200), qos: .atLeastOnce)

            let daemon = try await started(arguments, log: path + ".log-2")
            try await Task.sleep(for: settle)
            times.append(try await stop(daemon) * 1000)
            let stats = try await runProcess(thingAgent, ["stats", "--db", path, "--json"])
            received.append(Int((try? JSONParser.parse(stats.stdout))?["received"]?.int64Value ?? -1))
            for suffix in ["", "-wal", "-shm", ".journal", ".lock", ".storage"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
            }
        }
        return Figures(milliseconds: times.sorted(), received: received.sorted())
    }

    private func started(_ arguments: [String], log: String) async throws -> BenchDaemon {
        let daemon = try BenchDaemon(thingAgent, arguments, environment: [:], logPath: log)
        let deadline = ContinuousClock.now + .seconds(60)
        while !daemon.log.contains("connected and subscribed") {
            guard ContinuousClock.now < deadline, daemon.isRunning else {
                throw BenchError("the daemon did not subscribe: \(daemon.log.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        return daemon
    }

    /// SIGTERM, then the seconds until the process has exited (exit 0 required).
    @discardableResult
    private func stop(_ daemon: BenchDaemon) async throws -> Double {
        let signalled = ContinuousClock.now
        daemon.signal(SIGTERM)
        guard await daemon.waitForExit(timeout: .seconds(60)) == 0 else {
            throw BenchError("the daemon did not stop cleanly: \(daemon.log.suffix(2000))")
        }
        return (ContinuousClock.now - signalled).seconds
    }
}
