import Dispatch
import FoundationEssentials
import Platform
import Synchronization

/// Moves dirty devices from memory to SQLite in batches, on a thread of its own so that SQLite's I/O never runs on
/// the receive path or the cooperative pool. Wakes when something became dirty, lets a batch gather for `interval`,
/// writes it in one transaction, and empties the journal when it has grown large and SQLite holds all of it.
///
/// `report` gives `meta` rows to keep current in the file (the daemon's receive-path counters): they are written
/// whenever they differ from the rows last written, with a batch, or on their own every `reportInterval` while only
/// they move (a dropped message dirties no device), and at `stop()`.
final package class CacheFlusher: Sendable {
    package let writer: CacheWriter
    package let interval: Duration
    package let journalLimit: Int64
    package let reportInterval: Duration
    package let report: (@Sendable () -> [String: Int64])?
    /// The daemon's look at its files (`CacheFileCheck`), run every `reportInterval`.
    package let check: (@Sendable () -> Void)?
    package let logger: AgentLogger
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    /// Signalled by `stop()`, to cut a batch's gathering pause short.
    private let stopSignal = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    /// The `report` rows SQLite holds (touched by the flusher thread, then by `stop()` after it ended).
    private let reported = Mutex<[String: Int64]?>(nil)
    /// How the writes to SQLite go: the health check and the metrics read it.
    package let status = FlushStatus()

    /// When the thread last went round its loop (uptime nanoseconds); 0 before it started.
    private let heartbeat = Atomic<UInt64>(0)

    /// How long ago the flusher thread last went round its loop; nil when it does not run. With `report` set it
    /// wakes at least every `reportInterval`; a large value means a write is stuck.
    package var idle: Duration? {
        guard started.load(ordering: .relaxed), !stopping.load(ordering: .relaxed) else { return nil }
        let last = heartbeat.load(ordering: .relaxed)
        let now = DispatchTime.now().uptimeNanoseconds
        return .nanoseconds(Int64(clamping: now > last ? now - last : 0))
    }

    private func beat() {
        heartbeat.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
    }

    /// How many nice steps the flusher thread runs below the process.
    package static let nice: Int32 = 10

    package init(writer: CacheWriter, interval: Duration = .milliseconds(50), journalLimit: Int64 = 64 << 20,
         reportInterval: Duration = .seconds(1), report: (@Sendable () -> [String: Int64])? = nil,
         check: (@Sendable () -> Void)? = nil, logger: AgentLogger) {
        self.check = check
        self.writer = writer
        self.interval = interval
        self.journalLimit = journalLimit
        self.reportInterval = reportInterval
        self.report = report
        self.logger = logger
    }

    package func start() {
        guard !started.exchange(true, ordering: .relaxed) else { return }
        beat()
        // Below the receive path's priority: when the two cores are busy (a backlog streaming in, the broker beside),
        // the network thread, which holds the broker's acknowledgements, gets the CPU first; the flusher's batches
        // then gather longer, so each device is written fewer times. With a core to spare nothing changes.
        startDetachedThread(name: "thing-agent-flusher", nice: Self.nice) { [self] in
            var checked = ContinuousClock.now
            while !stopping.load(ordering: .relaxed) {
                beat()
                let woken: Bool
                if report == nil && check == nil {
                    writer.dirtySignal.wait()
                    woken = true
                } else {
                    woken = writer.dirtySignal.wait(timeout: .now() + reportInterval.seconds) == .success
                }
                guard !stopping.load(ordering: .relaxed) else { break }
                if woken {
                    pause(interval)  // let the batch gather; a stop cuts it short
                    flushOnce()
                } else {
                    reportOnce()
                }
                // Also under a steady load, when the wait above never times out.
                if let check, ContinuousClock.now - checked >= reportInterval {
                    check()
                    checked = ContinuousClock.now
                }
            }
            done.signal()
        }
    }

    /// Stops the thread after a last flush, and empties the journal (SQLite then holds everything).
    /// Call after the receive path has stopped.
    package func stop() {
        if started.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) {
            stopSignal.signal()
            writer.dirtySignal.signal()
            done.wait()
        }
        flushOnce(journalLimit: 0)
    }

    /// Sleeps for `duration`, or less when `stop()` is called meanwhile.
    private func pause(_ duration: Duration) {
        if stopping.load(ordering: .relaxed) { return }
        _ = stopSignal.wait(timeout: .now() + duration.seconds)
    }

    /// The `report` rows when they differ from those SQLite holds.
    private func changedReport() -> [String: Int64]? {
        guard let rows = report?(), rows != reported.withLock({ $0 }) else { return nil }
        return rows
    }

    private func flushOnce(journalLimit: Int64? = nil) {
        let started = ContinuousClock.now
        do {
            let rows = changedReport()
            try writer.flush(meta: rows ?? [:])
            if let rows { reported.withLock { $0 = rows } }
            try writer.compactJournal(threshold: journalLimit ?? self.journalLimit)
            status.succeeded(after: ContinuousClock.now - started)
            if let path = writer.databasePath { writer.storage.recovered(path, .write) }
        } catch {
            status.failed()
            // Logged once by the storage status (not at every retry), and again when it works.
            if let path = writer.databasePath {
                writer.storage.fail(path, .write, "could not write the cache to SQLite; will retry (the journal "
                                    + "keeps the data): \(error)", holdsIntake: false)
            } else {
                logger.error("could not write the cache to SQLite; will retry (the journal keeps the data)",
                             metadata: ["error": "\(error)"])
            }
            // Retry after a pause rather than spinning.
            if writer.hasDirty {
                pause(.seconds(1))
                writer.dirtySignal.signal()
            }
        }
    }

    /// Writes the `report` rows alone, when only they moved (devices wait for the batch their change started).
    private func reportOnce() {
        guard let rows = changedReport() else { return }
        do {
            try writer.writeMeta(rows)
            reported.withLock { $0 = rows }
        } catch {
            if let path = writer.databasePath {
                writer.storage.fail(path, .write, "could not write the counters to SQLite; will retry: \(error)",
                                    holdsIntake: false)
            } else {
                logger.error("could not write the counters to SQLite; will retry", metadata: ["error": "\(error)"])
            }
        }
    }
}
