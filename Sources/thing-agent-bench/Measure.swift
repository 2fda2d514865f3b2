import Foundation

/// Wall-clock timing and percentiles for the benchmarks.
enum Measure {
    static func seconds(_ body: () async throws -> Void) async rethrows -> Double {
        let start = ContinuousClock.now
        try await body()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let index = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
        return sorted[index]
    }

    /// CPU seconds (user + system) used so far by this process, or by its waited-for children.
    static func cpuSeconds(children: Bool = false) -> Double {
        var usage = rusage()
        getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// Voluntary plus involuntary context switches of this process (or its waited-for children) so far.
    static func contextSwitches(children: Bool = false) -> Int {
        var usage = rusage()
        getrusage(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue, &usage)
        return usage.ru_nvcsw + usage.ru_nivcsw
    }

    /// CPU seconds (user + system) so far of each of this process's threads, summed by thread name (the network
    /// thread is `mqtt-<client id>`, cut to 15 characters; the cache's flusher `thing-agent-flush`, cut likewise).
    static func cpuSecondsByThread() -> [String: Double] {
        var byName: [String: Double] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for task in tasks {
            guard let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                  let seconds = ProcessUsage.cpuSeconds(statFile: "/proc/self/task/\(task)/stat") else { continue }
            byName[name.trimmingCharacters(in: .whitespacesAndNewlines), default: 0] += seconds
        }
        return byName
    }

    /// Resident memory of this process in MiB (VmRSS).
    static func residentMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return .nan }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kib = line.split(separator: " ").compactMap { Double($0) }.first ?? .nan
            return kib / 1024
        }
        return .nan
    }
}

/// The table the benchmark prints at the end.
final class Report {
    private var rows: [(String, String, String)] = []

    func add(_ name: String, _ value: String, _ note: String = "") {
        rows.append((name, value, note))
        Swift.print("  \(name): \(value)\(note.isEmpty ? "" : "  (\(note))")")
    }

    func printTable() {
        let w0 = rows.map(\.0.count).max() ?? 0, w1 = rows.map(\.1.count).max() ?? 0
        Swift.print("\n| measure | figure | note |\n|---|---|---|")
        for (a, b, c) in rows {
            Swift.print("| \(a.padding(toLength: w0, withPad: " ", startingAt: 0)) | \(b.padding(toLength: w1, withPad: " ", startingAt: 0)) | \(c) |")
        }
    }
}

func format(_ value: Double, _ digits: Int = 0) -> String {
    String(format: "%.\(digits)f", value)
}
