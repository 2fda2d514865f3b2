import Synchronization

/// How the flusher's writes to SQLite go, read lock-free by the health check and the metrics.
final package class FlushStatus: Sendable {
    private let failuresInARow = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    package let durations = Histogram(bounds: Histogram.flushBounds)

    package func succeeded(after duration: Duration) {
        durations.record(duration)
        failuresInARow.store(0, ordering: .relaxed)
    }

    package func failed() {
        failures.add(1, ordering: .relaxed)
        failuresInARow.add(1, ordering: .relaxed)
    }

    /// False while the last write to SQLite failed (the journal keeps the data and the flusher retries).
    package var isFlushing: Bool { failuresInARow.load(ordering: .relaxed) == 0 }
    package var failedFlushes: Int { failures.load(ordering: .relaxed) }
}
