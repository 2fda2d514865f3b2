import Synchronization

/// How many cached devices are online, offline, or of unknown status (never reported one): counted as devices
/// change, under the cache's own lock, so that reading the numbers takes no lock at all.
final package class StatusTally: Sendable {
    private let online = Atomic<Int>(0)
    private let offline = Atomic<Int>(0)
    private let unknown = Atomic<Int>(0)

    /// A device moved from one status to another; `.none` on either side: it was added / removed.
    package func moved(from old: Bool??, to new: Bool??) {
        if let old { add(-1, to: old) }
        if let new { add(1, to: new) }
    }

    private func add(_ n: Int, to status: Bool?) {
        switch status {
        case true?: online.add(n, ordering: .relaxed)
        case false?: offline.add(n, ordering: .relaxed)
        case nil: unknown.add(n, ordering: .relaxed)
        }
    }

    package var counts: (online: Int, offline: Int, unknown: Int) {
        (online.load(ordering: .relaxed), offline.load(ordering: .relaxed), unknown.load(ordering: .relaxed))
    }
}
