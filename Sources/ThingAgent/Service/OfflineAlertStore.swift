import ThingAgentCore
/// The daemon's offline warnings in the cache file (`offline_alerts`): which devices are offline since when (agent
/// time) and whether they were warned about. Through the local store's connection (the one the daemon reopens when
/// the cache file is put back); written from the offline watch's timer, never from the receive path.
final class OfflineAlertStore: Sendable {
    struct Alert: Sendable, Equatable {
        var offlineSince: Millis
        var warned: Bool
    }

    private let local: LocalStore

    init(local: LocalStore) {
        self.local = local
    }

    func load() throws -> [String: Alert] {
        var alerts: [String: Alert] = [:]
        for row in try local.offlineAlerts() {
            alerts[row.id] = Alert(offlineSince: row.offlineSince, warned: row.warned)
        }
        return alerts
    }

    /// Writes the given devices' alerts in one transaction: a value is upserted, nil deletes the row.
    func save(_ changes: [String: Alert?]) throws {
        guard !changes.isEmpty else { return }
        try local.saveOfflineAlerts(changes.sorted { $0.key < $1.key }.map { id, alert in
            (id, alert.map { ($0.offlineSince, $0.warned) })
        })
    }
}
