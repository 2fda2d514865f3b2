import Synchronization

/// Why an incoming message was dropped.
public enum DropReason: String, Sendable, CaseIterable {
    /// Not under the topic root, or a thing topic the agent does not handle.
    case unknownTopic
    /// The device-id level breaks docs/protocol.md's rule.
    case invalidDeviceID
    /// Over 256 KiB.
    case oversized
    /// Not valid JSON, not an object, or of the wrong shape.
    case malformed
    /// An answer to one of this agent's requests that came after the request ended (timed out or cancelled).
    /// Answers to other clients' requests are not drops: they count as `forOtherClients`.
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
    /// An API request the broker kept as a retained message (delivered at a subscribe, at every start): neither
    /// executed nor answered, so that a retained `remove` or forced `set` never runs again by itself.
    case apiRetainedRefused
    /// An API request that came again (same client, same `id`) within the API's memory of answers: not run a
    /// second time; its first answer is sent again, or the copy dropped while the first still runs.
    case apiRepeated
}

/// Counters of the receive path. Every message received ends in exactly one of: applied, unchanged, for other
/// clients, a drop reason. `received` is counted on arrival and the outcome after it, so while messages flow a
/// snapshot may be a message or so apart; in a quiet moment `received == outcomes`.
public struct IngestStatistics: Sendable, Equatable {
    public var received = 0
    /// Changed the cache.
    public var applied = 0
    /// Stale or repeated: nothing to change. Answers to requests count here too.
    public var unchanged = 0
    public var dropped: [DropReason: Int] = [:]
    /// Answers addressed to another client (a CLI command's, another agent's): every client hears every answer,
    /// and these are normal traffic, not drops.
    public var forOtherClients = 0
    /// Corrections and refusals beside the outcome (`GuardReason`).
    public var guarded: [GuardReason: Int] = [:]

    public var droppedTotal: Int { dropped.values.reduce(0, +) }
    /// Messages that ended in an outcome: `received` once the last one is counted.
    public var outcomes: Int { applied + unchanged + forOtherClients + droppedTotal }
}

/// The live counters behind `IngestStatistics`: lock-free, since the receive path bumps two per message.
final package class IngestCounters: Sendable {
    package init() {}

    private let received = Atomic<Int>(0)
    private let applied = Atomic<Int>(0)
    private let unchanged = Atomic<Int>(0)
    private let forOtherClients = Atomic<Int>(0)
    /// One counter per reason, made up front: the table never changes, so neither the receive path nor a metrics
    /// scrape takes a lock for it.
    private let drops = Dictionary(uniqueKeysWithValues: DropReason.allCases.map { ($0, AtomicCounter()) })
    private let guards = Dictionary(uniqueKeysWithValues: GuardReason.allCases.map { ($0, AtomicCounter()) })

    package func countReceived() { received.add(1, ordering: .relaxed) }
    package func countApplied() { applied.add(1, ordering: .relaxed) }
    package func countUnchanged() { unchanged.add(1, ordering: .relaxed) }
    package func countForOtherClients() { forOtherClients.add(1, ordering: .relaxed) }
    /// Takes back `countReceived` for a message the receive path could not keep and left with the broker.
    package func countNotTaken() { received.subtract(1, ordering: .relaxed) }
    package func countDrop(_ reason: DropReason) { drops[reason]?.add() }
    package func countGuard(_ reason: GuardReason) { guards[reason]?.add() }

    package var snapshot: IngestStatistics {
        var stats = IngestStatistics()
        stats.received = received.load(ordering: .relaxed)
        stats.applied = applied.load(ordering: .relaxed)
        stats.unchanged = unchanged.load(ordering: .relaxed)
        stats.forOtherClients = forOtherClients.load(ordering: .relaxed)
        for (reason, counter) in drops where counter.value > 0 { stats.dropped[reason] = counter.value }
        for (reason, counter) in guards where counter.value > 0 { stats.guarded[reason] = counter.value }
        return stats
    }

    package func reset() {
        received.store(0, ordering: .relaxed)
        applied.store(0, ordering: .relaxed)
        unchanged.store(0, ordering: .relaxed)
        forOtherClients.store(0, ordering: .relaxed)
        for counter in drops.values { counter.store(0) }
        for counter in guards.values { counter.store(0) }
    }
}

extension IngestStatistics {
    /// The counters as the daemon writes them into the cache's `meta` table (docs/cache-file.md):
    /// `ingest.received`, `ingest.applied`, `ingest.unchanged`, `ingest.forOtherClients` and
    /// `ingest.dropped.<reason>` for every reason.
    package var metaRows: [String: Int64] {
        var rows = ["ingest.received": Int64(received), "ingest.applied": Int64(applied),
                    "ingest.unchanged": Int64(unchanged), "ingest.forOtherClients": Int64(forOtherClients)]
        for reason in DropReason.allCases { rows["ingest.dropped.\(reason.rawValue)"] = Int64(dropped[reason] ?? 0) }
        for reason in GuardReason.allCases { rows["ingest.guarded.\(reason.rawValue)"] = Int64(guarded[reason] ?? 0) }
        return rows
    }

    /// The `meta` key of the agent time (ms) from which the daemon counts.
    static package let sinceKey = "ingest.since"

    /// Reads the counters back from `meta` rows; nil when the daemon never wrote any.
    package init?(metaRows rows: [String: Int64]) {
        guard let received = rows["ingest.received"] else { return nil }
        self.received = Int(received)
        applied = Int(rows["ingest.applied"] ?? 0)
        unchanged = Int(rows["ingest.unchanged"] ?? 0)
        forOtherClients = Int(rows["ingest.forOtherClients"] ?? 0)
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

    package init?(metaRows rows: [String: Int64]) {
        guard let statistics = IngestStatistics(metaRows: rows) else { return nil }
        self.statistics = statistics
        since = rows[IngestStatistics.sinceKey] ?? 0
    }
}
