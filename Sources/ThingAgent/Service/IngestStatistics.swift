import Synchronization

/// Why an incoming message was dropped.
public enum DropReason: String, Sendable, CaseIterable {
    /// Not under the topic root, or a thing topic the agent does not handle.
    case unknownTopic
    /// The device-id level breaks PROTOCOL.md's rule.
    case invalidDeviceID
    /// Over 256 KiB.
    case oversized
    /// Not valid JSON, not an object, or of the wrong shape.
    case malformed
    /// An answer with no request waiting for it (unknown `msgId`, or late after a timeout).
    case unmatchedResponse
    /// Could not be applied to the cache. A message the journal cannot take (a full disk) is not dropped: it is
    /// left with the broker, and counted when it is taken later.
    case storeFailed
    /// From a new device while the cache holds `maxDevices`.
    case deviceLimit
}

/// Input the agent took but refused part of or corrected (besides each message's one outcome), or API requests it
/// refused: counted so that an operator sees a device or client misbehave.
public enum GuardReason: String, Sendable, CaseIterable {
    /// A time further ahead of the agent's clock than `maxClockSkew`, replaced by the arrival time.
    case clockSkew
    /// A report with new property codes beyond `maxPropertiesPerDevice`: those codes were refused.
    case propertyLimit
    /// A transfer `finish` for a transfer the agent did not start (nor trusts): no sub-device moved.
    case untrustedTransfer
    /// An API request whose reply topic is outside `replyPrefix`: not answered.
    case apiReplyRefused
    /// An API request over its client's `apiRateLimit`: answered 429.
    case apiRateLimited
}

/// Counters of the receive path. Every message received ends in exactly one of: applied, unchanged, a drop reason.
/// `received` is counted on arrival and the outcome after it, so while messages flow a snapshot may be a message
/// or so apart; in a quiet moment `received == applied + unchanged + droppedTotal`.
public struct IngestStatistics: Sendable, Equatable {
    public var received = 0
    /// Changed the cache.
    public var applied = 0
    /// Stale or repeated: nothing to change. Answers to requests count here too.
    public var unchanged = 0
    public var dropped: [DropReason: Int] = [:]
    /// Corrections and refusals beside the outcome (`GuardReason`).
    public var guarded: [GuardReason: Int] = [:]

    public var droppedTotal: Int { dropped.values.reduce(0, +) }
}

/// The live counters behind `IngestStatistics`: lock-free, since the receive path bumps two per message.
final class IngestCounters: Sendable {
    private let received = Atomic<Int>(0)
    private let applied = Atomic<Int>(0)
    private let unchanged = Atomic<Int>(0)
    private let drops = Mutex<[DropReason: Int]>([:])
    private let guards = Mutex<[GuardReason: Int]>([:])

    func countReceived() { received.add(1, ordering: .relaxed) }
    func countApplied() { applied.add(1, ordering: .relaxed) }
    func countUnchanged() { unchanged.add(1, ordering: .relaxed) }
    /// Takes back `countReceived` for a message the receive path could not keep and left with the broker.
    func countNotTaken() { received.subtract(1, ordering: .relaxed) }
    /// Drops are rare; a lock is fine there.
    func countDrop(_ reason: DropReason) { drops.withLock { $0[reason, default: 0] += 1 } }
    func countGuard(_ reason: GuardReason) { guards.withLock { $0[reason, default: 0] += 1 } }

    var snapshot: IngestStatistics {
        var stats = IngestStatistics()
        stats.received = received.load(ordering: .relaxed)
        stats.applied = applied.load(ordering: .relaxed)
        stats.unchanged = unchanged.load(ordering: .relaxed)
        stats.dropped = drops.withLock { $0 }
        stats.guarded = guards.withLock { $0 }
        return stats
    }

    func reset() {
        received.store(0, ordering: .relaxed)
        applied.store(0, ordering: .relaxed)
        unchanged.store(0, ordering: .relaxed)
        drops.withLock { $0 = [:] }
        guards.withLock { $0 = [:] }
    }
}

extension IngestStatistics {
    /// The counters as the daemon writes them into the cache's `meta` table (README, "The cache file"):
    /// `ingest.received`, `ingest.applied`, `ingest.unchanged` and `ingest.dropped.<reason>` for every reason.
    var metaRows: [String: Int64] {
        var rows = ["ingest.received": Int64(received), "ingest.applied": Int64(applied),
                    "ingest.unchanged": Int64(unchanged)]
        for reason in DropReason.allCases { rows["ingest.dropped.\(reason.rawValue)"] = Int64(dropped[reason] ?? 0) }
        for reason in GuardReason.allCases { rows["ingest.guarded.\(reason.rawValue)"] = Int64(guarded[reason] ?? 0) }
        return rows
    }

    /// The `meta` key of the agent time (ms) from which the daemon counts.
    static let sinceKey = "ingest.since"

    /// Reads the counters back from `meta` rows; nil when the daemon never wrote any.
    init?(metaRows rows: [String: Int64]) {
        guard let received = rows["ingest.received"] else { return nil }
        self.received = Int(received)
        applied = Int(rows["ingest.applied"] ?? 0)
        unchanged = Int(rows["ingest.unchanged"] ?? 0)
        for reason in DropReason.allCases {
            if let count = rows["ingest.dropped.\(reason.rawValue)"], count > 0 { dropped[reason] = Int(count) }
        }
        for reason in GuardReason.allCases {
            if let count = rows["ingest.guarded.\(reason.rawValue)"], count > 0 { guarded[reason] = Int(count) }
        }
    }
}

/// The receive-path counters of the daemon that runs (or last ran) on a cache file, as `thing-agent stats` shows
/// them. The daemon writes them with each batch it writes to SQLite, every second while only counters move (a
/// dropped message changes no device), and at a graceful stop.
public struct StoredStatistics: Sendable, Equatable {
    /// Counted since `since`; a restart of the daemon starts from zero.
    public var statistics: IngestStatistics
    /// Agent time (ms) the daemon started counting.
    public var since: Millis

    init?(metaRows rows: [String: Int64]) {
        guard let statistics = IngestStatistics(metaRows: rows) else { return nil }
        self.statistics = statistics
        since = rows[IngestStatistics.sinceKey] ?? 0
    }
}
