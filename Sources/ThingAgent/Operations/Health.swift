import JSON
import ThingAgentCore

/// Whether the agent does its job now: `GET /health` (200 healthy, 503 not) and the API's `health` method.
public struct HealthReport: Sendable, Equatable {
    public struct Check: Sendable, Equatable {
        public var name: String
        public var ok: Bool
        /// What was found, in a few words ("connected", "the last write to SQLite failed").
        public var detail: String
    }

    public var checks: [Check]
    /// In a group: its name, this instance, its role and since when, the active one, the members heard
    /// (`{"name","instance","role","since","active","failoverTimeout","members"}`).
    public var group: JSONObject?

    public var healthy: Bool { checks.allSatisfy(\.ok) }

    /// A write to SQLite that has not returned for this long makes the daemon unhealthy.
    static let stuckFlush: Duration = .seconds(30)

    /// `{"status":"ok"|"unhealthy","checks":{"<name>":{"ok":true,"detail":"..."}}}`
    public var json: JSONObject {
        var checks = JSONObject()
        for check in self.checks {
            checks[check.name] = .object(JSONObject([("ok", .bool(check.ok)), ("detail", .string(check.detail))]))
        }
        var object = JSONObject([("status", .string(healthy ? "ok" : "unhealthy")), ("checks", .object(checks))])
        if let group { object["group"] = .object(group) }
        return object
    }
}

extension Agent {
    /// The conditions of health, each read without locks. The one place to add one: a check is a name, whether it
    /// holds, and what was found.
    var healthChecks: [@Sendable () -> HealthReport.Check] {
        let connection = connectionLog, flusher = flusher, storage = writer.storage
        return [
            {
                HealthReport.Check(name: "broker", ok: connection.isConnected,
                                   detail: connection.isConnected ? "connected to \(connection.broker.url)"
                                       : "not connected")
            },
            {
                // The last write failed, or one has not come back for a long time (the flusher wakes every second).
                let stuck = (flusher.idle ?? .zero) > HealthReport.stuckFlush
                let ok = flusher.status.isFlushing && !stuck
                let detail = ok ? "writing to SQLite"
                    : stuck ? "a write to SQLite has not returned for over \(HealthReport.stuckFlush)"
                    : "the last write to SQLite failed"
                return HealthReport.Check(name: "flush", ok: ok, detail: detail)
            },
            {
                // The atomic first: the problem list's lock is taken only while there are problems.
                guard storage.hasProblems else { return HealthReport.Check(name: "storage", ok: true, detail: "ok") }
                let status = storage.status
                let detail = status.problems.first.map { "\(status.state): \($0.error)" } ?? status.state
                return HealthReport.Check(name: "storage", ok: status.isHealthy, detail: detail)
            },
        ]
    }

    /// Healthy while connected to the broker, the cache's writes to SQLite succeed, and every file works.
    public func health() -> HealthReport {
        HealthReport(checks: healthChecks.map { $0() }, group: groupJSON)
    }
}
