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
    /// Could not be written to the cache (disk full, read-only file).
    case storeFailed
}

/// Counters of the receive path. Every message received ends in exactly one of: applied, unchanged, a drop reason.
public struct IngestStatistics: Sendable, Equatable {
    public var received = 0
    /// Changed the cache.
    public var applied = 0
    /// Stale or repeated: nothing to change. Answers to requests count here too.
    public var unchanged = 0
    public var dropped: [DropReason: Int] = [:]

    public var droppedTotal: Int { dropped.values.reduce(0, +) }
}

/// The live counters behind `IngestStatistics`: lock-free, since the receive path bumps two per message.
final class IngestCounters: Sendable {
    private let received = Atomic<Int>(0)
    private let applied = Atomic<Int>(0)
    private let unchanged = Atomic<Int>(0)
    private let drops = Mutex<[DropReason: Int]>([:])

    func countReceived() { received.add(1, ordering: .relaxed) }
    func countApplied() { applied.add(1, ordering: .relaxed) }
    func countUnchanged() { unchanged.add(1, ordering: .relaxed) }
    /// Drops are rare; a lock is fine there.
    func countDrop(_ reason: DropReason) { drops.withLock { $0[reason, default: 0] += 1 } }

    var snapshot: IngestStatistics {
        var stats = IngestStatistics()
        stats.received = received.load(ordering: .relaxed)
        stats.applied = applied.load(ordering: .relaxed)
        stats.unchanged = unchanged.load(ordering: .relaxed)
        stats.dropped = drops.withLock { $0 }
        return stats
    }

    func reset() {
        received.store(0, ordering: .relaxed)
        applied.store(0, ordering: .relaxed)
        unchanged.store(0, ordering: .relaxed)
        drops.withLock { $0 = [:] }
    }
}
