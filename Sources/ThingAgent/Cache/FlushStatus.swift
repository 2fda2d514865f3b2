import Synchronization

/// How the flusher's writes to SQLite go, read lock-free by the health check and the metrics.
final class FlushStatus: Sendable {
    private let failuresInARow = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    let durations = Histogram(bounds: Histogram.flushBounds)

    func succeeded(after duration: Duration) {
        durations.record(duration)
        failuresInARow.store(0, ordering: .relaxed)
    }

    func failed() {
        failures.add(1, ordering: .relaxed)
        failuresInARow.add(1, ordering: .relaxed)
    }

    /// False while the last write to SQLite failed (the journal keeps the data and the flusher retries).
    var isFlushing: Bool { failuresInARow.load(ordering: .relaxed) == 0 }
    var failedFlushes: Int { failures.load(ordering: .relaxed) }
}
