import FoundationEssentials
import Glibc
import JSON
import Synchronization

/// A logger's level, shared by the copies of one logger so that a reload reaches all of them.
final package class LogThreshold: Sendable {
    private let raw: Atomic<Int>

    package init(_ level: AgentLogger.Level) {
        raw = Atomic(level.rawValue)
    }

    package var level: AgentLogger.Level {
        get { AgentLogger.Level(rawValue: raw.load(ordering: .relaxed)) ?? .info }
        set { raw.store(newValue.rawValue, ordering: .relaxed) }
    }
}

extension AgentLogger.Level {
    /// The syslog priority of sd-daemon(3) (`<N>` prefixes) and journald (`journalctl -p`).
    public var syslogPriority: Int {
        switch self {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}

/// How metadata values appear in JSON log lines: numbers as numbers, everything else as strings.
package enum LogValue {
    /// Identifiers stay strings even when they look like numbers (a device id "42", a msgId "1001"), so a field
    /// keeps one type from line to line.
    static package let identifierKeys: Set<String> = [
        "device", "gateway", "msgId", "id", "clientId", "topic", "user", "name", "from", "to", "target", "source",
    ]

    static package func json(key: String, _ text: String) -> JSONValue {
        guard !identifierKeys.contains(key) else { return .string(text) }
        // Only the canonical spelling turns into a number, so the number prints back as the same text.
        if let integer = Int64(text), String(integer) == text { return .integer(integer) }
        if let double = Double(text), double.isFinite, text.contains("."), String(double) == text {
            return .double(double)
        }
        return .string(text)
    }
}

/// journald's stream connection (systemd.exec(5), `$JOURNAL_STREAM`).
package enum Journald {
    /// True when `$JOURNAL_STREAM` (`device:inode`) names the file stderr is: systemd set it for this process,
    /// not for a parent whose stderr was redirected since.
    static package func isStandardError(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        let parts = stream.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }
}
