import JSON

/// Whether the agent does its job now: `GET /health` (200 healthy, 503 not) and the API's `health` method.
public struct HealthReport: Sendable, Equatable {
    public struct Check: Sendable, Equatable {
        public var name: String
        public var ok: Bool
        /// What was found, in a few words ("connected", "the last write to SQLite failed").
        public var detail: String
    }

    public var checks: [Check]

    public var healthy: Bool { checks.allSatisfy(\.ok) }

    /// `{"status":"ok"|"unhealthy","checks":{"<name>":{"ok":true,"detail":"..."}}}`
    public var json: JSONObject {
        var checks = JSONObject()
        for check in self.checks {
            checks[check.name] = .object(JSONObject([("ok", .bool(check.ok)), ("detail", .string(check.detail))]))
        }
        return JSONObject([("status", .string(healthy ? "ok" : "unhealthy")), ("checks", .object(checks))])
    }
}

extension Agent {
    /// The conditions of health, each read without locks. The one place to add one: a check is a name, whether it
    /// holds, and what was found.
    var healthChecks: [@Sendable () -> HealthReport.Check] {
        let connection = connectionLog, flushes = flusher.status
        return [
            {
                HealthReport.Check(name: "broker", ok: connection.isConnected,
                                   detail: connection.isConnected ? "connected" : "not connected")
            },
            {
                HealthReport.Check(name: "flush", ok: flushes.isFlushing,
                                   detail: flushes.isFlushing ? "writing to SQLite" : "the last write to SQLite failed")
            },
        ]
    }

    /// Healthy while connected to the broker and the cache's writes to SQLite succeed.
    public func health() -> HealthReport {
        HealthReport(checks: healthChecks.map { $0() })
    }
}
