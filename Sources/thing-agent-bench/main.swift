import Foundation
import MQTT

/// thing-agent's benchmarks: one run against one local broker, figures printed as a table.
/// Build in release: `swift run -c release thing-agent-bench [--quick]`; `--help` lists the rest.
let arguments = CommandLine.arguments
let options = BenchArguments.parse(arguments)
if let index = arguments.firstIndex(of: "--load-probe"), index + 1 < arguments.count {
    try loadProbe(cache: arguments[index + 1])
    exit(0)
}
if let index = arguments.firstIndex(of: "--make-cache"), index + 2 < arguments.count, let count = Int(arguments[index + 1]) {
    try await makeCache(devices: count, at: arguments[index + 2])
    exit(0)
}
// `--info-process N CACHE EXECUTABLE...`: the whole `info` process of each executable (the packaged binary beside
// the toolchain-linked one) over a cache of N devices made with --make-cache, runs interleaved.
if let index = arguments.firstIndex(of: "--info-process"), index + 3 < arguments.count,
   let count = Int(arguments[index + 1]) {
    let cache = arguments[index + 2]
    for round in 1...3 {
        for executable in arguments[(index + 3)...] {
            let (p50, p90) = try infoProcessMilliseconds(executable: executable, cache: cache, devices: count)
            print("round \(round) \(executable): info p50 \(format(p50, 1)) ms, p90 \(format(p90, 1)) ms")
        }
    }
    exit(0)
}
// `--versus-sqlite N CACHE EXECUTABLE...`: `info` (text and `--json`) and `devices` of each executable beside
// `sqlite3` answering the same from a cache of N devices made with --make-cache: the cache part's comparison alone.
if let index = arguments.firstIndex(of: "--versus-sqlite"), index + 3 < arguments.count,
   let count = Int(arguments[index + 1]) {
    let executables = arguments[(index + 3)...].map { (name: $0, path: $0) }
    let versus = Report()
    try compareWithSQLite(versus, thingAgents: executables, cache: arguments[index + 2], devices: count,
                          quick: arguments.contains("--quick"))
    versus.printTable()
    exit(0)
}
let quick = options.quick
let only = options.only
/// Whether the section runs; every section is one of `BenchArguments.sections` (what `--only` and `--help` know).
func section(_ name: String) -> Bool {
    precondition(BenchArguments.sections.contains(name), "section \(name) is missing from BenchArguments.sections")
    return only == nil || only == name
}
let binDirectory = URL(fileURLWithPath: arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent().path
let report = Report()
/// The toolchain-linked `thing-agent` beside the bench, and the packaged static one when `scripts/package` built it.
let thingAgents: [(name: String, path: String)] = {
    let packaged = URL(fileURLWithPath: binDirectory).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("package/release/thing-agent").path
    return [("toolchain-linked", binDirectory + "/thing-agent")]
        + (FileManager.default.isExecutableFile(atPath: packaged) ? [("packaged (static)", packaged)] : [])
}()
let directory = try benchDirectory("thing-agent-bench")
defer { try? FileManager.default.removeItem(atPath: directory) }

// No broker: the receive path alone, also under valgrind (which cannot follow the broker's start).
if options.receivePath {
    let count = options.count ?? 200_000
    let messages = propertyReports(count: count, devices: 1000)
    let path = ReceivePathBenchmark(directory: directory)
    if !options.memoryOnly {
        report.add("receive path, QoS 1 property report, cached to SQLite", "\(format(try await path.run(messages), 2)) µs/msg")
    }
    report.add("receive path, property report, memory only", "\(format(try await path.run(messages, store: false), 2)) µs/msg")
    report.printTable()
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
}

// No broker either: the receive path while the metrics are rendered.
if options.scrape {
    let count = options.count ?? 200_000
    let scrape = try await ScrapeBenchmark(directory: directory).run(propertyReports(count: count, devices: 1000))
    report.add("receive path alone, QoS 1 property report, cached to SQLite", "\(format(scrape.alone, 2)) µs/msg")
    report.add("receive path while the metrics are rendered every 10 ms", "\(format(scrape.everyTenMilliseconds, 2)) µs/msg")
    report.add("receive path while the metrics are rendered without pause", "\(format(scrape.scraped, 2)) µs/msg",
               "one scrape \(format(scrape.scrapeMicroseconds, 1)) µs")
    report.printTable()
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
}

let broker = try await BenchBroker.start(
    extraConfig: "max_queued_messages 0\nmax_inflight_messages 100\nqueue_qos0_messages true\nset_tcp_nodelay true\n")
defer { broker.stop() }

if section("ingest") {
print("ingest (backlog drained through a persistent session)")
let count = quick ? 20_000 : 100_000
let ingest = IngestBenchmark(broker: broker, directory: directory)
// Alternated pairs: the ratio is their median (`--rounds N`, 3 by default, 1 with --quick).
let rounds = options.rounds ?? (quick ? 1 : 3)
let shapes: [(name: String, messages: [(topic: String, payload: [UInt8])], filter: String, qos: QoS, dialects: [String])] = [
    ("QoS 1 property reports", propertyReports(count: count, devices: 1000), "things/+/thing/properties",
     .atLeastOnce, ["native"]),
    ("QoS 0 signal reports", signalReports(count: count, devices: 1000), "things/+/thing/signal", .atMostOnce,
     ["native"]),
    ("QoS 1 Alink property posts", alinkPosts(count: count, devices: 1000), "/sys/+/+/thing/event/+/post",
     .atLeastOnce, ["native", "alink"]),
    ("QoS 1 TuyaLink property reports", tuyaLinkReports(count: count, devices: 1000), "tylink/+/thing/property/report",
     .atLeastOnce, ["native", "tuyalink"]),
]
for shape in shapes {
    let comparison = try await ingest.compare(shape.messages, filter: shape.filter, qos: shape.qos,
                                              dialects: shape.dialects, rounds: rounds)
    comparison.add(to: report, raw: "raw mosquitto_sub, \(shape.name)",
                   agent: "thing-agent, \(shape.name)" + (shape.dialects.contains("alink") ? ", each answered" : ""))
}
}

if section("ingest") || section("daemon") {
    print("whole process: a backlog of QoS 1 reports from 200 devices queued for a persistent session")
    let count = quick ? 20_000 : 100_000
    let processes = ProcessBenchmarks(broker: broker, directory: directory, thingAgent: binDirectory + "/thing-agent")
    // The bench's own reports (each value with its time), the shape devices in the field send, and the vendor
    // SDKs' shapes (the daemon speaking their dialect; Alink's posts each answered).
    let shapes: [BacklogShape] = [
        .timedValues,
        BacklogShape(name: "realistic reports (msgId, time, three bare values)", filter: "things/+/thing/properties",
                     dialects: ["native"], make: { realisticReports(count: $0, devices: $1) }),
        BacklogShape(name: "TuyaLink reports as Tuya's SDK sends them", filter: "tylink/+/thing/property/report",
                     dialects: ["native", "tuyalink"], make: { tuyaLinkReports(count: $0, devices: $1) }),
        BacklogShape(name: "Alink property posts as Linkkit sends them, each answered",
                     filter: "/sys/+/+/thing/event/property/post", dialects: ["native", "alink"],
                     make: { alinkPosts(count: $0, devices: $1) },
                     device: { topic in topic.split(separator: "/")[1] + "." + topic.split(separator: "/")[2] },
                     marker: { value in Array("""
                         {"id":"1","version":"1.0","params":{"mode":"\(value)"},"method":"thing.event.property.post"}
                         """.utf8) }),
    ]
    for shape in shapes {
        let (raw, rawCPU) = try await IngestBenchmark(broker: broker, directory: directory)
            .rawClient(shape.make(count, 200), filter: shape.filter, qos: .atLeastOnce)
        report.add("`mosquitto_sub -c -q 1 -C \(count)` draining the backlog, \(shape.name)", "\(format(raw)) msg/s",
                   "\(format(rawCPU, 1)) µs CPU/msg")
        for feed in [true, false] {
            let drain = try await processes.daemonDrain(count: count, devices: 200, eventFeed: feed,
                                                        shape: shape)
            report.add("`thing-agent run` on it until `info` shows the last, event feed \(feed ? "on" : "off")",
                       "\(format(drain.perSecond)) msg/s",
                       "ratio \(format(drain.perSecond / raw, 2)), \(format(drain.cpuMicroseconds, 1)) µs CPU/msg "
                       + "(ratio \(format(drain.cpuMicroseconds / rawCPU, 2))), \(format(drain.contextSwitches, 3)) switches/msg"
                       + (feed ? "; events published \(drain.eventsPublished), dropped \(drain.eventsDropped)" : ""))
            report.add("  of which the daemon's start until subscribed", "\(format(drain.subscribedAfter.seconds * 1000, 1)) ms", "")
        }
    }
}

if section("homeAssistant") {
    print("Home Assistant: the discovery of a fleet after a start, beside a backlog of QoS 1 reports")
    let devices = quick ? 2_000 : 10_000
    let backlog = quick ? 20_000 : 200_000
    let figures = try await HomeAssistantBenchmark(broker: broker, directory: directory).run(devices: devices, backlog: backlog)
    report.add("discovery of \(devices) devices after a start (config, state, availability each, paced to 2,000/s)",
               "\(format(figures.discoverySeconds, 1)) s", "\(figures.messages) messages")
    report.add("backlog of \(backlog) reports drained while it runs", "\(format(figures.drainOn)) msg/s",
               "ingest ratio \(format(figures.drainOn / figures.drainOff, 2)) of \(format(figures.drainOff)) msg/s "
               + "with Home Assistant off; drained in \(format(figures.drainOnSeconds, 1)) s")
}

if section("stop") {
    print("graceful stop: SIGTERM to exit while the daemon drains a backlog of QoS 1 reports")
    let backlog = quick ? 20_000 : 100_000
    let stops = try await StopBenchmark(broker: broker, directory: directory, thingAgent: binDirectory + "/thing-agent")
        .run(rounds: quick ? 3 : 10, backlog: backlog)
    report.add("SIGTERM to exit, backlog of \(backlog) reports, p50 / max",
               "\(format(Measure.percentile(stops.milliseconds, 50))) / \(format(stops.milliseconds.last ?? .nan)) ms",
               "\(stops.milliseconds.count) stops; received before the stop: "
               + "\(stops.received.first ?? -1)–\(stops.received.last ?? -1) of \(backlog)")
}

if section("latency") {
    print("latency, publish to listener")
    let latency = try await LatencyBenchmark(brokerURL: broker.url, directory: directory)
        .run(rate: 5000, seconds: quick ? 2 : 10)
    report.add("listener latency at 5,000 msg/s, p50 / p99 / p99.9",
               "\(format(latency.p50 / 1000, 2)) / \(format(latency.p99 / 1000, 2)) / \(format(latency.p999 / 1000, 2)) ms",
               "\(latency.received) reports")
}

if section("set") {
    print("property-set round trips")
    let sets = try await SetBenchmark(brokerURL: broker.url, directory: directory)
        .run(devices: 50, sequential: quick ? 200 : 1000, concurrent: quick ? 1000 : 5000)
    report.add("set round trip, sequential, p50 / p99", "\(format(sets.p50, 2)) / \(format(sets.p99, 2)) ms", "50 answering devices")
    report.add("set throughput, all in flight at once", "\(format(sets.perSecond)) sets/s")
    let cli = try await SetBenchmark(brokerURL: broker.url, directory: directory)
        .cliSets(executable: binDirectory + "/thing-agent", runs: quick ? 10 : 50)
    report.add("`thing-agent set` process, p50 / p90", "\(format(cli.p50, 1)) / \(format(cli.p90, 1)) ms")
}

if section("link") {
    print("multi-control link, report to set")
    let link = try await LinkBenchmark(brokerURL: broker.url, directory: directory).run(rounds: quick ? 200 : 1000)
    report.add("link: member report to the other member's set, p50 / p99",
               "\(format(link.p50, 2)) / \(format(link.p99, 2)) ms", "through the broker, echo handled each round")
}

if section("json") {
    print("JSON on a request payload")
    for (name, nanoseconds) in try await JSONBenchmark.run(iterations: quick ? 100_000 : 1_000_000) {
        report.add("JSON \(name)", "\(format(nanoseconds)) ns/payload")
    }
}

if section("cache") {
    for devices in quick ? [100_000] : [100_000, 1_000_000] {
        print("cache with \(devices) devices")
        let path = directory + "/cache-\(devices).sqlite"
        let made = try await Measure.seconds { try await makeCache(devices: devices, at: path) }
        print("  made in \(format(made, 1)) s")
        let (ready, rss) = try await restartToReady(benchExecutable: arguments[0], cache: path)
        let goal = devices >= 1_000_000 ? 3.0 : 0.3
        report.add("restart to ready, \(devices) devices", "\(format(ready, 2)) s",
                   "\(format(ready / goal, 2))× the \(format(goal, 1)) s goal, resident \(format(rss)) MiB")
        if devices == 100_000 {
            let ns = try await deviceInfoNanoseconds(cache: path, devices: devices)
            report.add("deviceInfo in process, \(devices) devices", "\(format(ns)) ns/call")
            let (p50, p90) = try infoProcessMilliseconds(executable: binDirectory + "/thing-agent", cache: path,
                                                               devices: devices)
            report.add("`thing-agent info` process, \(devices) devices, p50 / p90", "\(format(p50, 1)) / \(format(p90, 1)) ms")
            try compareWithSQLite(report, thingAgents: thingAgents, cache: path, devices: devices, quick: quick)
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}

report.printTable()
