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

/// The live counters behind `IngestStatistics`; one uncontended lock per message.
final class IngestCounters: Sendable {
    private let stats = Mutex(IngestStatistics())

    func countReceived() { stats.withLock { $0.received += 1 } }
    func countApplied() { stats.withLock { $0.applied += 1 } }
    func countUnchanged() { stats.withLock { $0.unchanged += 1 } }
    func countDrop(_ reason: DropReason) { stats.withLock { $0.dropped[reason, default: 0] += 1 } }

    var snapshot: IngestStatistics { stats.withLock { $0 } }

    func reset() { stats.withLock { $0 = IngestStatistics() } }
}
