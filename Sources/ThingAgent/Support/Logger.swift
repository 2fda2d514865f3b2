import Foundation
import JSON
import Synchronization

/// A small logger shaped like swift-log's: levels, a label, metadata. Libraries take one; they never make one.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
        case trace, debug, info, notice, warning, error, critical

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        public var description: String {
            switch self {
            case .trace: "trace"
            case .debug: "debug"
            case .info: "info"
            case .notice: "notice"
            case .warning: "warning"
            case .error: "error"
            case .critical: "critical"
            }
        }

        public init?(name: String) {
            guard let level = Level.allCases.first(where: { $0.description == name.lowercased() }) else { return nil }
            self = level
        }
    }

    public typealias Metadata = [String: String]

    public var label: String
    /// Setting it affects this logger alone; `changeSharedLevel(to:)` changes every copy made from it.
    public var logLevel: Level {
        get { threshold.level }
        set { threshold = LogThreshold(newValue) }
    }
    public var metadata: Metadata = [:]
    private let sink: LogSink
    private var threshold: LogThreshold

    public init(label: String, level: Level = .info, sink: LogSink) {
        self.label = label
        self.threshold = LogThreshold(level)
        self.sink = sink
    }

    /// Changes the level of this logger and of every copy made from it (SIGHUP's reload of `logLevel`: the
    /// daemon's parts each hold a copy).
    public func changeSharedLevel(to level: Level) {
        threshold.level = level
    }

    /// A logger that discards everything (the default for library users who pass none).
    public static let disabled = Logger(label: "disabled", level: .critical, sink: LogSink.discard)

    public func log(_ level: Level, _ message: @autoclosure () -> String, metadata extra: Metadata = [:]) {
        guard level >= logLevel else { return }
        sink.write(level: level, label: label, message: message(), metadata: metadata.merging(extra) { $1 })
    }

    public func trace(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.trace, message(), metadata: metadata) }
    public func debug(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.debug, message(), metadata: metadata) }
    public func info(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.info, message(), metadata: metadata) }
    public func notice(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.notice, message(), metadata: metadata) }
    public func warning(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.warning, message(), metadata: metadata) }
    public func error(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.error, message(), metadata: metadata) }
    public func critical(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.critical, message(), metadata: metadata) }
}

/// Where log lines go: text lines for people or JSON lines for machines, on stderr so journald keeps them.
public struct LogSink: Sendable {
    public enum Format: String, Sendable {
        case text, json
    }

    private let write: @Sendable (String) -> Void
    private let format: Format
    /// Starts each line with sd-daemon(3)'s `<N>` priority, which journald turns into the entry's priority.
    private let priorityPrefix: Bool

    public init(format: Format, priorityPrefix: Bool = false, write: @escaping @Sendable (String) -> Void) {
        self.format = format
        self.priorityPrefix = priorityPrefix
        self.write = write
    }

    /// Lines on stderr, with priority prefixes when stderr is connected to journald.
    public static func standardError(format: Format) -> LogSink {
        LogSink(format: format, priorityPrefix: Journald.isStandardError()) { line in
            try? FileHandle.standardError.write(contentsOf: Data((line + "\n").utf8))
        }
    }

    public static let discard = LogSink(format: .text) { _ in }

    /// RFC 3339 in UTC with its zone (`2026-12-01T09:08:21.123Z`).
    private static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    func write(level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) {
        let time = Date().formatted(Self.timeStyle)
        let prefix = priorityPrefix ? "<\(level.syslogPriority)>" : ""
        switch format {
        case .text:
            // One line per entry, and nothing in it a terminal would act on (device names and topics end up here).
            let meta = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.terminalSafe())" }
                .joined(separator: " ")
            write("\(prefix)\(time) \(level) \(label): \(message.terminalSafe())\(meta.isEmpty ? "" : " " + meta)")
        case .json:
            var object = JSONObject([("time", .string(time)), ("level", .string(level.description)),
                                     ("label", .string(label)), ("message", .string(message))])
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                object[key] = LogValue.json(key: key, value)
            }
            write(prefix + JSONValue.object(object).serialized())
        }
    }
}

/// Lets a repeated complaint through at most once per interval per key (a topic), with a bounded memory.
final class LogRateLimiter: Sendable {
    private let interval: Millis
    private let maxKeys: Int
    private let lastLogged = Mutex<[String: Millis]>([:])

    init(interval: Millis = 60_000, maxKeys: Int = 4096) {
        self.interval = interval
        self.maxKeys = maxKeys
    }

    func shouldLog(_ key: String, now: Millis) -> Bool {
        lastLogged.withLock { table in
            if let last = table[key], now - last < interval { return false }
            if table.count >= maxKeys { table.removeAll(keepingCapacity: true) }
            table[key] = now
            return true
        }
    }
}
