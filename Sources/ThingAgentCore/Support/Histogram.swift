import Synchronization

/// A Prometheus histogram that records without locks: one atomic per bucket, the sum in nanoseconds. A scrape reads
/// the atomics one by one, so a snapshot taken while values arrive may be a value apart between buckets (Prometheus
/// tolerates that; the counts only grow).
final package class Histogram: Sendable {
    /// Upper bounds in seconds, ascending; `+Inf` is implied.
    package let bounds: [Double]
    private let buckets: [AtomicCounter]
    private let count = Atomic<Int>(0)
    private let sumNanoseconds = Atomic<Int>(0)

    package init(bounds: [Double]) {
        self.bounds = bounds
        buckets = bounds.map { _ in AtomicCounter() }
    }

    package func record(_ duration: Duration) {
        let seconds = duration.seconds
        if let index = bounds.firstIndex(where: { seconds <= $0 }) { buckets[index].add() }
        let (whole, fraction) = duration.components
        sumNanoseconds.add(Int(whole) * 1_000_000_000 + Int(fraction / 1_000_000_000), ordering: .relaxed)
        count.add(1, ordering: .relaxed)
    }

    package struct Snapshot: Sendable {
        /// Cumulative counts per bound, as the text format wants them.
        package var cumulative: [(bound: Double, count: Int)]
        package var count: Int
        package var sum: Double
    }

    package var snapshot: Snapshot {
        var running = 0
        var cumulative: [(bound: Double, count: Int)] = []
        for (bound, bucket) in zip(bounds, buckets) {
            running += bucket.value
            cumulative.append((bound, running))
        }
        // Read after the buckets, so that the +Inf count is never below the last bucket's.
        let total = max(count.load(ordering: .relaxed), running)
        return Snapshot(cumulative: cumulative, count: total,
                        sum: Double(sumNanoseconds.load(ordering: .relaxed)) / 1e9)
    }

    static package let requestBounds = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    static package let flushBounds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
}

