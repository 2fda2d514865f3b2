import ThingAgent

/// Whether a daemon still holds the cache, for a command that follows work the daemon does (an upgrade). Asked
/// without taking the lock, so that a daemon starting again meanwhile finds it free. A daemon counts as gone only
/// once none has held the lock for `grace`: a restart (a crash and systemd's `RestartSec=5`, a start-up on a busy
/// machine) is not its end, and the daemon that comes back goes on with the work.
struct DaemonPresence {
    static let defaultGrace: Duration = .seconds(15)

    let cache: String
    let grace: Duration
    private var absentSince: ContinuousClock.Instant?

    init(cache: String, grace: Duration = Self.defaultGrace) {
        self.cache = cache
        self.grace = grace
    }

    /// True once no daemon has held the cache for `grace` (a command holding it is no daemon).
    mutating func isGone(now: ContinuousClock.Instant = .now) -> Bool {
        let held = CacheLock.currentHolder(cache: cache)
        var isCommand = false
        if case .command? = held?.heldBy { isCommand = true }
        guard held == nil || isCommand else {
            absentSince = nil
            return false
        }
        let since = absentSince ?? now
        absentSince = since
        return now - since >= grace
    }
}
