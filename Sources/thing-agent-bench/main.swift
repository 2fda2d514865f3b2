import Foundation
import TestSupport

/// thing-agent's benchmarks: one run against one local broker, figures printed as a table.
/// Build in release: `swift run -c release thing-agent-bench [--quick]`.
let quick = CommandLine.arguments.contains("--quick")
let report = Report()
let directory = try makeTemporaryDirectory("thing-agent-bench")
defer { try? FileManager.default.removeItem(atPath: directory) }

var options = MosquittoBroker.Options()
options.extraConfig = "max_queued_messages 0\nmax_inflight_messages 100\nqueue_qos0_messages true\n"
let broker = try await MosquittoBroker.start(options)
defer { broker.stop() }

if CommandLine.arguments.contains("--receive-path") {
    let count = CommandLine.arguments.firstIndex(of: "--count").map { Int(CommandLine.arguments[$0 + 1]) ?? 0 } ?? 200_000
    let messages = propertyReports(count: count, devices: 1000)
    let path = ReceivePathBenchmark(directory: directory)
    if !CommandLine.arguments.contains("--memory-only") {
        report.add("receive path, QoS 1 property report, cached to SQLite", "\(format(try await path.run(messages), 2)) µs/msg")
    }
    report.add("receive path, property report, memory only", "\(format(try await path.run(messages, store: false), 2)) µs/msg")
    report.printTable()
    exit(0)
}

print("ingest (backlog drained through a persistent session)")
let count = quick ? 20_000 : 100_000
let ingest = IngestBenchmark(broker: broker, directory: directory)
let reports = propertyReports(count: count, devices: 1000)
let (raw1, rawCPU1) = try await ingest.rawClient(reports, filter: "things/+/thing/properties", qos: .atLeastOnce)
report.add("raw mosquitto_sub, QoS 1 property reports", "\(format(raw1)) msg/s", "\(format(rawCPU1, 1)) µs CPU/msg")
let (agent1, agentCPU1) = try await ingest.agent(reports, qos: .atLeastOnce)
report.add("thing-agent, QoS 1 property reports", "\(format(agent1)) msg/s",
           "ratio \(format(agent1 / raw1, 2)), \(format(agentCPU1, 1)) µs CPU/msg")
let signals = signalReports(count: count, devices: 1000)
let (raw0, rawCPU0) = try await ingest.rawClient(signals, filter: "things/+/thing/signal", qos: .atMostOnce)
report.add("raw mosquitto_sub, QoS 0 signal reports", "\(format(raw0)) msg/s", "\(format(rawCPU0, 1)) µs CPU/msg")
let (agent0, agentCPU0) = try await ingest.agent(signals, qos: .atMostOnce)
report.add("thing-agent, QoS 0 signal reports", "\(format(agent0)) msg/s",
           "ratio \(format(agent0 / raw0, 2)), \(format(agentCPU0, 1)) µs CPU/msg")

report.printTable()
