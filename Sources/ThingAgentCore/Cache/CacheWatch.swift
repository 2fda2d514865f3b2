import Synchronization

/// Hears every change the cache writer applied, whoever caused it: a device's report, an answer, an agent verdict
/// (a transfer started or stalled), a removal. The offline and transfer watches are told this way, and only this
/// way, so a new write path cannot forget to tell them. Called after the change is in memory, outside the
/// writer's lock, on the thread that made the change (the receive path's included): keep it short.
package protocol CacheWatch: Sendable {
    func applied(_ changes: AppliedChanges, to device: String, now: Millis)
    func removed(_ device: String)
    /// A firmware upgrade moved (started, progressed, ended).
    func upgradeChanged(_ upgrade: OTAUpgrade)
}

extension CacheWatch {
    /// Most watches have no business with firmware upgrades.
    package func upgradeChanged(_ upgrade: OTAUpgrade) {}
}

/// The watches a writer tells; registered once while the agent is made, read on every change.
final package class CacheWatches: Sendable {
    private let watches = Mutex<[any CacheWatch]>([])

    package func add(_ watch: any CacheWatch) {
        watches.withLock { $0.append(watch) }
    }

    package func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        for watch in watches.withLock({ $0 }) { watch.applied(changes, to: device, now: now) }
    }

    package func removed(_ device: String) {
        for watch in watches.withLock({ $0 }) { watch.removed(device) }
    }

    package func upgradeChanged(_ upgrade: OTAUpgrade) {
        for watch in watches.withLock({ $0 }) { watch.upgradeChanged(upgrade) }
    }
}
