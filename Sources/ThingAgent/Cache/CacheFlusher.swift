import Foundation
import Synchronization

/// Moves dirty devices from memory to SQLite in batches, on a thread of its own so that SQLite's I/O never runs on
/// the receive path or the cooperative pool. Wakes when something became dirty, lets a batch gather for `interval`,
/// writes it in one transaction, and empties the journal when it has grown large and SQLite holds all of it.
///
/// `report` gives `meta` rows to keep current in the file (the daemon's receive-path counters): they are written
/// whenever they differ from the rows last written, with a batch, or on their own every `reportInterval` while only
/// they move (a dropped message dirties no device), and at `stop()`.
final class CacheFlusher: Sendable {
    let writer: CacheWriter
    let interval: Duration
    let journalLimit: Int64
    let reportInterval: Duration
    let report: (@Sendable () -> [String: Int64])?
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    /// The `report` rows SQLite holds (touched by the flusher thread, then by `stop()` after it ended).
    private let reported = Mutex<[String: Int64]?>(nil)

    init(writer: CacheWriter, interval: Duration = .milliseconds(50), journalLimit: Int64 = 64 << 20,
         reportInterval: Duration = .seconds(1), report: (@Sendable () -> [String: Int64])? = nil, logger: Logger) {
        self.writer = writer
        self.interval = interval
        self.journalLimit = journalLimit
        self.reportInterval = reportInterval
        self.report = report
        self.logger = logger
    }

    func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        let thread = Thread { [self] in
            while !stopping.load(ordering: .relaxed) {
                let woken: Bool
                if report == nil {
                    writer.dirtySignal.wait()
                    woken = true
                } else {
                    woken = writer.dirtySignal.wait(timeout: .now() + reportInterval.seconds) == .success
                }
                guard !stopping.load(ordering: .relaxed) else { break }
                if woken { Thread.sleep(forTimeInterval: interval.seconds) }
                flushOnce()
            }
            done.signal()
        }
        thread.name = "thing-agent-flusher"
        thread.start()
    }

    /// Stops the thread after a last flush. Call after the receive path has stopped.
    func stop() {
        if started.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) {
            writer.dirtySignal.signal()
            done.wait()
        }
        flushOnce()
    }

    private func flushOnce() {
        do {
            let rows = report?()
            let changed = rows != nil && rows != reported.withLock { $0 }
            try writer.flush(meta: changed ? rows ?? [:] : [:])
            if changed { reported.withLock { $0 = rows } }
            try writer.compactJournal(threshold: journalLimit)
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
