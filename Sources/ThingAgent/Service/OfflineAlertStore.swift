import SQLite
import Synchronization

/// The daemon's offline warnings in the cache file (`offline_alerts`): which devices are offline since when (agent
/// time) and whether they were warned about. Its own connection; written from the offline watch's timer, never
/// from the receive path.
final class OfflineAlertStore: Sendable {
    struct Alert: Sendable, Equatable {
        var offlineSince: Millis
        var warned: Bool
    }

    private let database: Mutex<Database>

    init(path: String) throws {
        let database = try Database(path: path)
        _ = try Migrator(CacheSchema.migrations).migrate(database)
        self.database = Mutex(database)
    }

    func load() throws -> [String: Alert] {
        try database.withLock { db throws -> [String: Alert] in
            var alerts: [String: Alert] = [:]
            for row in try db.query("SELECT dev_id, offline_since, warned FROM offline_alerts") {
                guard let id = row.string("dev_id"), let since = row.int("offline_since") else { continue }
                alerts[id] = Alert(offlineSince: since, warned: (row.int("warned") ?? 0) != 0)
            }
            return alerts
        }
    }

    /// Writes the given devices' alerts in one transaction: a value is upserted, nil deletes the row.
    func save(_ changes: [String: Alert?]) throws {
        guard !changes.isEmpty else { return }
        try database.withLock { db throws in
            try db.transaction {
                for (id, alert) in changes.sorted(by: { $0.key < $1.key }) {
                    if let alert {
                        try db.run("""
                            INSERT INTO offline_alerts (dev_id, offline_since, warned) VALUES (?, ?, ?)
                            ON CONFLICT(dev_id) DO UPDATE SET offline_since = excluded.offline_since,
                                warned = excluded.warned
                            """, [.text(id), .integer(alert.offlineSince), .integer(alert.warned ? 1 : 0)])
                    } else {
                        try db.run("DELETE FROM offline_alerts WHERE dev_id = ?", [.text(id)])
                    }
                }
            }
        }
    }
}
