import Foundation
import MQTT
import ThingAgent

/// Whole processes, as a user meets them: the daemon draining a queued backlog, and one `info` or `devices`
/// process, each beside the plain tool doing the same job (`mosquitto_sub`, `sqlite3`).
struct ProcessBenchmarks {
    let broker: BenchBroker
    let directory: String
    /// The `thing-agent` executable built beside the bench.
    let thingAgent: String

    struct Drain {
        var perSecond: Double
        var cpuMicroseconds: Double
        var contextSwitches: Double
        /// The event feed's work when the last report was in the file (from the daemon's metrics): events the
        /// broker took, and events dropped because the feed's queue was full.
        var eventsPublished = 0
        var eventsDropped = 0
        /// From starting the process to its log saying it is connected and subscribed.
        var subscribedAfter: Duration = .zero
    }

    /// `count` QoS 1 property reports from `devices` devices queued for the daemon's persistent session; the clock
    /// runs from starting `thing-agent run` to the last report being in the cache file (polled every 5 ms, then
    /// read once more with `thing-agent info`).
    /// `eventFeed`: the daemon republishes every change on the events topics (its default), or not.
    /// `shape`: the backlog's reports, the dialects the daemon speaks for them, and its last report.
    func daemonDrain(count: Int, devices: Int, eventFeed: Bool = true, shape: BacklogShape = .timedValues)
        async throws -> Drain {
        let metrics = "127.0.0.1:\(Int.random(in: 20_000...60_000))"
        let environment = ["THING_AGENT_PUBLISH_EVENTS": eventFeed ? "true" : "false", "THING_AGENT_METRICS": metrics,
                           "THING_AGENT_DIALECTS": shape.dialects.joined(separator: ",")]
        let path = directory + "/daemon-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let arguments = ["run", "--broker", broker.url, "--db", path,
                         "--client-id", "bench-daemon-\(UInt32.random(in: 0...UInt32.max))"]
        // The first run makes the persistent session; the backlog is queued for it while no daemon runs.
        try await runDaemon(arguments, environment, log: path + ".log-1") { _ in }
        let marker = "last-\(UInt32.random(in: 0...UInt32.max))"
        var reports = shape.make(count, devices)
        let lastDevice = shape.device(reports[count - 1].topic)
        reports[count - 1].payload = shape.marker(marker)
        try await Publisher(url: broker.url).publish(reports, qos: .atLeastOnce)

        var drain = Drain(perSecond: 0, cpuMicroseconds: 0, contextSwitches: 0)
        let start = ContinuousClock.now
        try await runDaemon(arguments, environment, log: path + ".log-2") { daemon in
            drain.subscribedAfter = ContinuousClock.now - start
            let deadline = ContinuousClock.now + .seconds(120)
            while (try? CacheReader(path: path).device(lastDevice))??.properties["mode"]?.value.stringValue != marker {
                guard ContinuousClock.now < deadline, daemon.isRunning else {
                    throw BenchError("the daemon did not drain the backlog: \(daemon.log.suffix(2000))")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            let elapsed = ContinuousClock.now - start
            drain.perSecond = Double(count) / elapsed.seconds
            let usage = ProcessUsage(pid: daemon.pid)
            drain.cpuMicroseconds = usage.cpuSeconds / Double(count) * 1e6
            drain.contextSwitches = Double(usage.contextSwitches) / Double(count)
            let scraped = try await runProcess("/usr/bin/curl", ["-s", "http://\(metrics)/metrics"]).stdout
            drain.eventsPublished = Self.metric("thing_agent_events_published_total", in: scraped)
            drain.eventsDropped = Self.metric("thing_agent_listener_events_dropped_total", in: scraped)
        }
        let info = try await runProcess(thingAgent, ["info", lastDevice, "--db", path, "--json"])
        guard info.status == 0, info.stdout.contains(marker) else {
            throw BenchError("`info \(lastDevice)` does not show the last report: \(info.stdout) \(info.stderr)")
        }
        return drain
    }

    /// A counter's value in Prometheus text (0 when absent).
    static func metric(_ name: String, in text: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.split(separator: " ").last ?? "") ?? 0)
        }
        return 0
    }

    /// Starts the daemon, waits until it is subscribed, runs `body`, then stops it with SIGTERM.
    private func runDaemon(_ arguments: [String], _ environment: [String: String], log: String,
                           _ body: (BenchDaemon) async throws -> Void) async throws {
        let daemon = try BenchDaemon(thingAgent, arguments, environment: environment, logPath: log)
        let deadline = ContinuousClock.now + .seconds(60)
        while !daemon.log.contains("connected and subscribed") {
            guard ContinuousClock.now < deadline, daemon.isRunning else {
                throw BenchError("the daemon did not subscribe: \(daemon.log.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        try await body(daemon)
        daemon.signal(SIGTERM)
        guard await daemon.waitForExit(timeout: .seconds(30)) == 0 else {
            throw BenchError("the daemon did not stop cleanly: \(daemon.log.suffix(2000))")
        }
    }

    /// Median wall milliseconds of one whole process, for each command, run in interleaved rounds (so that a
    /// burst of load on the machine falls on all of them alike).
    static func medianMilliseconds(_ commands: [(executable: String, arguments: [String])], rounds: Int) throws -> [Double] {
        var times = Array(repeating: [Double](), count: commands.count)
        for round in 0..<rounds {
            // Every other round runs backwards: a process pays for the caches the one before it evicted, so each
            // command follows the others equally often (run in one order, the first after `sqlite3` read higher).
            let order = round % 2 == 0 ? Array(commands.indices) : commands.indices.reversed()
            for index in order {
                let command = commands[index]
                let process = Process()
                process.executableURL = URL(fileURLWithPath: command.executable)
                process.arguments = command.arguments
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                let start = ContinuousClock.now
                try process.run()
                waitForExit(process)
                let elapsed = ContinuousClock.now - start
                guard process.terminationStatus == 0 else {
                    throw BenchError("\(command.executable) \(command.arguments) exited \(process.terminationStatus)")
                }
                times[index].append(elapsed.seconds * 1000)
            }
        }
        return times.map { Measure.percentile($0.sorted(), 50) }
    }

    /// `sqlite3`'s query for the columns `thing-agent devices` prints (id, name, category, status, Wi-Fi, number of
    /// properties, updated).
    static let devicesQuery = """
        SELECT d.dev_id, d.name, d.category, d.online, d.wifi_signal, count(p.code), d.updated_at \
        FROM devices d LEFT JOIN properties p ON p.dev_id = d.dev_id GROUP BY d.dev_id
        """
}

/// `info` (text and JSON) and `devices` as whole processes, each beside `sqlite3` answering the same from the file.
/// Each executable is measured: the toolchain-linked build, and the packaged (static) one when it was built.
func compareWithSQLite(_ report: Report, thingAgents: [(name: String, path: String)], cache path: String, devices: Int,
                       quick: Bool) throws {
    let id = "dev\(devices / 2)"
    let sqlite = ("/usr/bin/sqlite3", [path, "SELECT * FROM devices WHERE dev_id = '\(id)'"])
    let info = try ProcessBenchmarks.medianMilliseconds([sqlite] + thingAgents.flatMap { agent in [
        (agent.path, ["info", id, "--db", path]),
        (agent.path, ["info", id, "--db", path, "--json"]),
    ] }, rounds: quick ? 10 : 30)
    report.add("`sqlite3` answering one device's row, \(devices) devices", "\(format(info[0], 1)) ms", "median")
    for (n, agent) in thingAgents.enumerated() {
        let text = info[1 + 2 * n], json = info[2 + 2 * n]
        report.add("`thing-agent info DEVICE`, \(agent.name)", "\(format(text, 1)) ms",
                   "ratio \(format(text / info[0], 2)), median")
        report.add("`thing-agent info DEVICE --json`, \(agent.name)", "\(format(json, 1)) ms",
                   "ratio \(format(json / info[0], 2)), median")
    }
    let list = try ProcessBenchmarks.medianMilliseconds([("/usr/bin/sqlite3", [path, ProcessBenchmarks.devicesQuery])]
        + thingAgents.map { ($0.path, ["devices", "--db", path]) }, rounds: quick ? 3 : 10)
    report.add("`sqlite3` listing the columns of `devices`, \(devices) devices", "\(format(list[0], 1)) ms", "median")
    for (n, agent) in thingAgents.enumerated() {
        report.add("`thing-agent devices`, \(agent.name)", "\(format(list[1 + n], 1)) ms",
                   "ratio \(format(list[1 + n] / list[0], 2)), median")
    }
}

/// CPU time and context switches of a running process, from /proc.
struct ProcessUsage {
    var cpuSeconds: Double = .nan
    var contextSwitches = 0

    /// User plus system CPU seconds from a `/proc/PID/stat` or `/proc/PID/task/TID/stat` file; nil when unreadable.
    static func cpuSeconds(statFile path: String) -> Double? {
        guard let stat = try? String(contentsOfFile: path, encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name; utime and stime are the 14th and 15th of the whole line.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    init(pid: Int32) {
        cpuSeconds = Self.cpuSeconds(statFile: "/proc/\(pid)/stat") ?? .nan
        // Counted per thread: the process's own status file counts its main thread alone.
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else {
                continue
            }
            for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
                contextSwitches += Int(line.split(separator: "\t").last ?? "") ?? 0
            }
        }
    }
}
