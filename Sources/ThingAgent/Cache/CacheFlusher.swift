import Foundation
import Synchronization

/// Moves dirty devices from memory to SQLite in batches, on a thread of its own so that SQLite's I/O never runs on
/// the receive path or the cooperative pool. Wakes when something became dirty, lets a batch gather for `interval`,
/// writes it in one transaction, and empties the journal when it has grown large and SQLite holds all of it.
final class CacheFlusher: Sendable {
    let writer: CacheWriter
    let interval: Duration
    let journalLimit: Int64
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    init(writer: CacheWriter, interval: Duration = .milliseconds(50), journalLimit: Int64 = 64 << 20, logger: Logger) {
        self.writer = writer
        self.interval = interval
        self.journalLimit = journalLimit
        self.logger = logger
    }

    func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                writer.dirtySignal.wait()
                guard !stopping.load(ordering: .relaxed) else { break }
                Thread.sleep(forTimeInterval: interval.seconds)
                flushOnce()
            }
            done.signal()
        }
        thread.name = "thing-agent-flusher"
        thread.start()
    }

    /// Stops the thread after a last flush, and empties the journal (SQLite then holds everything).
    /// Call after the receive path has stopped.
    func stop() {
        if started.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) {
            writer.dirtySignal.signal()
            done.wait()
        }
        flushOnce(journalLimit: 0)
    }

    private func flushOnce(journalLimit: Int64? = nil) {
        do {
            try writer.flush()
            try writer.compactJournal(threshold: journalLimit ?? self.journalLimit)
        } catch {
            logger.error("could not write the cache to SQLite; will retry (the journal keeps the data)",
                         metadata: ["error": "\(error)"])
            // Retry after a pause rather than spinning.
            if writer.hasDirty {
                Thread.sleep(forTimeInterval: 1)
                writer.dirtySignal.signal()
            }
        }
    }
}
