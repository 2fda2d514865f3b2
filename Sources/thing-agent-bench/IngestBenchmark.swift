import Foundation
import MQTT
import Synchronization
import ThingAgent

/// Ingest: how fast the agent drains a backlog of reports queued for its persistent session (decoded, durably
/// cached, dispatched to a listener), against `mosquitto_sub` (raw libmosquitto) draining the same backlog.
struct IngestBenchmark {
    let broker: BenchBroker
    let directory: String

    /// Messages per second, and CPU microseconds the receiving client spent per message.
    func rawClient(_ messages: [(topic: String, payload: [UInt8])], filter: String, qos: QoS) async throws -> (Double, Double) {
        let id = "raw-\(UInt32.random(in: 0...UInt32.max))"
        let common = ["-h", "127.0.0.1", "-p", "\(broker.port)", "-i", id, "-c", "-q", "\(qos.rawValue)", "-t", filter]
        // Make the session, queue the backlog, then time the drain.
        _ = try await runProcess("/usr/bin/mosquitto_sub", common + ["-E"])
        try await Publisher(url: broker.url).publish(messages, qos: qos)
        let cpu = Measure.cpuSeconds(children: true)
        let brokerCPU = broker.cpuSeconds
        let switches = Measure.contextSwitches(children: true)
        let seconds = try await Measure.seconds {
            let result = try await runProcess("/usr/bin/mosquitto_sub", common + ["-C", "\(messages.count)", "-W", "60"])
            guard result.status == 0 else { throw BenchError("mosquitto_sub failed: \(result.stderr)") }
        }
        let used = Measure.cpuSeconds(children: true) - cpu
        print("    raw: \(Double(Measure.contextSwitches(children: true) - switches) / Double(messages.count)) context switches/msg, "
              + "broker \(format((broker.cpuSeconds - brokerCPU) / Double(messages.count) * 1e6, 1)) µs CPU/msg")
        return (Double(messages.count) / seconds, used / Double(messages.count) * 1e6)
    }

    /// `dialects`: config `dialects` (the Alink posts need `alink`; each is answered, as the SDK wants).
    func agent(_ messages: [(topic: String, payload: [UInt8])], qos: QoS, dialects: [String] = ["native"]) async throws
        -> (Double, Double) {
        var configuration = AgentConfiguration()
        configuration.dialects = dialects
        configuration.events.publish = false
        configuration.api.enabled = false
        configuration.mqtt.broker = broker.url
        configuration.cache.database = directory + "/ingest-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        configuration.mqtt.clientID = "bench-agent-\(UInt32.random(in: 0...UInt32.max))"
        // Make the persistent session, then stop: the backlog is queued for it.
        let first = try Agent(configuration: configuration)
        try await first.start()
        await first.stop()
        try await Publisher(url: broker.url).publish(messages, qos: qos)

        let agent = try Agent(configuration: configuration)
        if let pause = ProcessInfo.processInfo.environment["BENCH_PAUSE_BEFORE_DRAIN"].flatMap(Double.init) {
            // Lets a profiler attach to just the drain: `perf record -p <pid>` during the pause.
            FileHandle.standardError.write(Data("  draining in \(pause) s (pid \(getpid()))\n".utf8))
            try await Task.sleep(for: .seconds(pause))
        }
        let dispatched = Atomic<Int>(0)
        let token = agent.events.addListener(kinds: [.properties, .signal]) { _ in
            dispatched.add(1, ordering: .relaxed)
        }
        let cpu = Measure.cpuSeconds()
        let brokerCPU = broker.cpuSeconds
        let threadsBefore = Measure.cpuSecondsByThread()
        let switches = Measure.contextSwitches()
        let seconds = try await Measure.seconds {
            try await agent.start()
            while agent.statistics.received < messages.count {
                try await Task.sleep(for: .milliseconds(2))
            }
        }
        let used = Measure.cpuSeconds() - cpu
        print("    agent: \(Double(Measure.contextSwitches() - switches) / Double(messages.count)) context switches/msg, "
              + "broker \(format((broker.cpuSeconds - brokerCPU) / Double(messages.count) * 1e6, 1)) µs CPU/msg")
        // Where the CPU went: the network thread (receive path), the flusher (SQLite), the rest (tasks, listener).
        let byThread = Measure.cpuSecondsByThread().map { name, seconds in (name, seconds - (threadsBefore[name] ?? 0)) }
        print("    agent CPU by thread, µs/msg: " + byThread.filter { $0.1 > 0 }.sorted { $0.1 > $1.1 }
            .map { "\($0.0) \(format($0.1 / Double(messages.count) * 1e6, 1))" }.joined(separator: ", "))
        let stats = agent.statistics
        token.cancel()
        await agent.stop()
        if stats.droppedTotal > 0 { print("  warning: the agent dropped \(stats.dropped)") }
        return (Double(messages.count) / seconds, used / Double(messages.count) * 1e6)
    }
}

/// One backlog drained by the raw client and by the agent in alternated pairs, each on a fresh session. On two
/// cores shared with the broker a single pair's ratio moves by ±0.2 from run to run; the median of the pairs' ratios
/// is the figure, their range beside it.
struct IngestComparison {
    /// (messages per second, CPU µs per message), one per pair.
    var raw: [(Double, Double)] = []
    var agent: [(Double, Double)] = []

    /// The median as the bench takes it everywhere (`Measure.percentile`, 50).
    private static func median(_ values: [Double]) -> Double { Measure.percentile(values.sorted(), 50) }

    /// Adds the raw client's line and the agent's (medians, the ratio's median and range) to `report`.
    func add(to report: Report, raw rawName: String, agent agentName: String) {
        let ratios = zip(agent, raw).map { $0.0 / $1.0 }.sorted()
        let pairs = ratios.count
        report.add(rawName, "\(format(Self.median(raw.map(\.0)))) msg/s",
                   "\(format(Self.median(raw.map(\.1)), 1)) µs CPU/msg" + (pairs > 1 ? ", median of \(pairs)" : ""))
        let range = pairs > 1 ? " (pairs \(format(ratios.first!, 2))–\(format(ratios.last!, 2)))" : ""
        report.add(agentName, "\(format(Self.median(agent.map(\.0)))) msg/s",
                   "ratio \(format(Self.median(ratios), 2))\(range), \(format(Self.median(agent.map(\.1)), 1)) µs CPU/msg")
    }
}

extension IngestBenchmark {
    /// `rounds` pairs, the raw client first in the first, third, … and second in the others, so that neither side
    /// always drains after the other.
    func compare(_ messages: [(topic: String, payload: [UInt8])], filter: String, qos: QoS,
                 dialects: [String] = ["native"], rounds: Int) async throws -> IngestComparison {
        var comparison = IngestComparison()
        for round in 0..<max(1, rounds) {
            if round % 2 == 1 { comparison.agent.append(try await agent(messages, qos: qos, dialects: dialects)) }
            comparison.raw.append(try await rawClient(messages, filter: filter, qos: qos))
            if round % 2 == 0 { comparison.agent.append(try await agent(messages, qos: qos, dialects: dialects)) }
        }
        return comparison
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
