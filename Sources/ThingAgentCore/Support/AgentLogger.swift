import FoundationEssentials
import JSON
import Synchronization

/// Where the agent's log records go, shaped like swift-log's `LogHandler`: each record arrives whole (level,
/// label, message, metadata), so an embedding app routes them to its own backend (swift-log, os_log, a test
/// buffer). The daemon's output is two of them: `TextLogHandler` and `JSONLogHandler`.
/// Called on the thread that logs, the receive path's included: hand the record on, do not block.
public protocol AgentLogHandler: Sendable {
    func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata)
}

/// The logger the agent's parts take, shaped like swift-log's `Logger` (levels, a label, metadata) under a name of
/// its own, so that an app using both never sees two `Logger`s. Libraries take one; they never make one.
public struct AgentLogger: Sendable {
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
    public let handler: any AgentLogHandler
    private var threshold: LogThreshold

    public init(label: String, level: Level = .info, handler: any AgentLogHandler) {
        self.label = label
        self.threshold = LogThreshold(level)
        self.handler = handler
    }

    /// Changes the level of this logger and of every copy made from it (SIGHUP's reload of `logLevel`: the
    /// daemon's parts each hold a copy).
    public func changeSharedLevel(to level: Level) {
        threshold.level = level
    }

    /// A logger that discards everything (the default for library users who pass none).
    public static let disabled = AgentLogger(label: "disabled", level: .critical, handler: DiscardingLogHandler())

    public func log(_ level: Level, _ message: @autoclosure () -> String, metadata extra: Metadata = [:]) {
        guard level >= logLevel else { return }
        handler.log(level: level, label: label, message: message(), metadata: metadata.merging(extra) { $1 })
    }

    public func trace(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.trace, message(), metadata: metadata) }
    public func debug(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.debug, message(), metadata: metadata) }
    public func info(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.info, message(), metadata: metadata) }
    public func notice(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.notice, message(), metadata: metadata) }
    public func warning(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.warning, message(), metadata: metadata) }
    public func error(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.error, message(), metadata: metadata) }
    public func critical(_ message: @autoclosure () -> String, metadata: Metadata = [:]) { log(.critical, message(), metadata: metadata) }
}

/// Drops every record.
public struct DiscardingLogHandler: AgentLogHandler {
    public init() {}
    public func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata) {}
}

/// Lets a repeated complaint through at most once per interval per key (a topic), with a bounded memory.
final package class LogRateLimiter: Sendable {
    private let interval: Millis
    private let maxKeys: Int
    private let lastLogged = Mutex<[String: Millis]>([:])

    package init(interval: Millis = 60_000, maxKeys: Int = 4096) {
        self.interval = interval
        self.maxKeys = maxKeys
    }

    package func shouldLog(_ key: String, now: Millis) -> Bool {
        lastLogged.withLock { table in
            if let last = table[key], now - last < interval { return false }
            if table.count >= maxKeys { table.removeAll(keepingCapacity: true) }
            table[key] = now
            return true
        }
    }
}
