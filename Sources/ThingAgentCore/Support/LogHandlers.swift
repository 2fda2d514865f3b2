import FoundationEssentials
import Glibc
import JSON
import Platform

/// Lines for people: `<time> <level> <label>: <message> key=value…`.
public struct TextLogHandler: AgentLogHandler {
    private let line: LogLine

    /// `priorityPrefix` starts each line with sd-daemon(3)'s `<N>`, which journald turns into the entry's priority.
    public init(priorityPrefix: Bool = false, write: @escaping @Sendable (String) -> Void) {
        line = LogLine(priorityPrefix: priorityPrefix, write: write)
    }

    /// Lines on stderr, with priority prefixes when stderr is connected to journald.
    public static func standardError() -> TextLogHandler {
        TextLogHandler(priorityPrefix: Journald.isStandardError(), write: LogLine.standardError)
    }

    public func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata) {
        // One line per entry, and nothing in it a terminal would act on (device names and topics end up here).
        let meta = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.terminalSafe())" }
            .joined(separator: " ")
        line.write(level, "\(LogLine.now()) \(level) \(label): \(message.terminalSafe())\(meta.isEmpty ? "" : " " + meta)")
    }
}

/// JSON lines for machines: `time`, `level`, `label`, `message`, then the metadata (numbers as numbers).
public struct JSONLogHandler: AgentLogHandler {
    private let line: LogLine

    public init(priorityPrefix: Bool = false, write: @escaping @Sendable (String) -> Void) {
        line = LogLine(priorityPrefix: priorityPrefix, write: write)
    }

    public static func standardError() -> JSONLogHandler {
        JSONLogHandler(priorityPrefix: Journald.isStandardError(), write: LogLine.standardError)
    }

    public func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata) {
        var object = JSONObject([("time", .string(LogLine.now())), ("level", .string(level.description)),
                                 ("label", .string(label)), ("message", .string(message))])
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            object[key] = LogValue.json(key: key, value)
        }
        line.write(level, JSONValue.object(object).serialized())
    }
}

/// The daemon's two output formats (`logFormat`).
public enum LogFormat: String, Sendable, CaseIterable {
    case text, json

    /// The handler that writes this format on stderr.
    public func standardErrorHandler() -> any AgentLogHandler {
        switch self {
        case .text: TextLogHandler.standardError()
        case .json: JSONLogHandler.standardError()
        }
    }
}

/// What both line handlers share: the journald priority prefix and where a finished line goes.
private struct LogLine: Sendable {
    let priorityPrefix: Bool
    let write: @Sendable (String) -> Void

    /// RFC 3339 in UTC with its zone (`2026-12-01T09:08:21.123Z`).
    private static let timeStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    static func now() -> String { Date().formatted(timeStyle) }

    static let standardError: @Sendable (String) -> Void = { line in
        writeAll(line + "\n", to: STDERR_FILENO)
    }

    func write(_ level: AgentLogger.Level, _ text: String) {
        write(priorityPrefix ? "<\(level.syslogPriority)>" + text : text)
    }
}
