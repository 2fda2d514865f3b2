#if canImport(Glibc)
import Glibc
#endif
import JSON
import Synchronization

/// Keeps the daemon's `StorageStatus`: the receive path, the flusher and the file checks report what fails and what
/// works again; each change is logged once (an error naming the file, then a notice when it works again) and
/// written to the status file. Reading `holdsIntake` costs one atomic load: the receive path asks per message.
final package class StorageMonitor: Sendable {
    /// What reported a problem: each clears only its own (a commit that works does not make an immutable file
    /// writable, and the file check does not know whether the journal has room).
    package enum Cause: Sendable {
        /// A journal append failed (no room to grow it, the file truncated).
        case journalAppend
        /// A SQLite transaction failed.
        case write
        /// The periodic check found the file gone, replaced, truncated or not writable.
        case check
    }

    private struct Entry {
        var problem: StorageStatus.Problem
        var cause: Cause
    }

    private let entries = Mutex<[Entry]>([])
    private let holding = Atomic<Bool>(false)
    private let count = Atomic<Int>(0)
    private let logger: AgentLogger
    private let statusFile: StorageStatusFile?

    package init(logger: AgentLogger = .disabled, statusFile: StorageStatusFile? = nil) {
        self.logger = logger
        self.statusFile = statusFile
        statusFile?.write(StorageStatus())
    }

    package var status: StorageStatus {
        entries.withLock { StorageStatus(problems: $0.map(\.problem)) }
    }

    /// New messages must be left with the broker.
    package var holdsIntake: Bool { holding.load(ordering: .relaxed) }
    package var hasProblems: Bool { count.load(ordering: .relaxed) > 0 }

    /// Whether `cause` reported a problem with `file` that is not cleared yet.
    package func isFailing(_ file: String, _ cause: Cause) -> Bool {
        hasProblems && entries.withLock { $0.contains { $0.problem.file == file && $0.cause == cause } }
    }

    package func fail(_ file: String, _ cause: Cause, _ error: String, holdsIntake: Bool) {
        let changed = update { entries in
            if let index = entries.firstIndex(where: { $0.problem.file == file && $0.cause == cause }) {
                guard entries[index].problem.error != error || entries[index].problem.holdsIntake != holdsIntake
                else { return false }
                entries[index].problem.error = error
                entries[index].problem.holdsIntake = holdsIntake
            } else {
                let problem = StorageStatus.Problem(file: file, error: error, since: Timestamp.now(),
                                                    holdsIntake: holdsIntake)
                entries.append(Entry(problem: problem, cause: cause))
            }
            return true
        }
        guard let changed else { return }
        logger.error("storage failing: \(error)", metadata: [
            "file": file, "storage": changed.state,
            "intake": holdsIntake ? "held: new messages stay with the broker" : "going on: the journal keeps them",
        ])
    }

    package func recovered(_ file: String, _ cause: Cause) {
        guard hasProblems else { return }
        let changed = update { entries in
            let before = entries.count
            entries.removeAll { $0.problem.file == file && $0.cause == cause }
            return entries.count != before
        }
        guard let changed else { return }
        logger.notice("storage works again", metadata: ["file": file, "storage": changed.state])
    }

    /// Runs `body` on the entries; when it says they changed, refreshes the fast flags and the status file and
    /// returns the new status.
    private func update(_ body: (inout [Entry]) -> Bool) -> StorageStatus? {
        let status = entries.withLock { entries -> StorageStatus? in
            guard body(&entries) else { return nil }
            entries.sort { ($0.problem.file, $0.problem.since) < ($1.problem.file, $1.problem.since) }
            let status = StorageStatus(problems: entries.map(\.problem))
            holding.store(status.holdsIntake, ordering: .relaxed)
            count.store(entries.count, ordering: .relaxed)
            return status
        }
        if let status { statusFile?.write(status) }
        return status
    }
}

/// `<database>.storage`: the daemon's storage status as JSON, for `thing-agent stats` (another process). Written in
/// place over blocks allocated when it was created, so it can still be updated when the disk is full.
final package class StorageStatusFile: Sendable {
    static package let size = 4096
    package let path: String
    private let fd: Int32

    package init?(path: String) {
        self.path = path
        fd = PrivateFiles.open(path, flags: O_RDWR)
        guard fd >= 0 else { return nil }
        // Real bytes, not only reserved blocks: overwriting them later needs no allocation on ext4 or tmpfs.
        let blank = [UInt8](repeating: 0x20, count: Self.size)
        _ = pwrite(fd, blank, blank.count, 0)
    }

    deinit { close(fd) }

    package func write(_ status: StorageStatus) {
        // Bounded so that it always fits: a few problems (one per file and cause) with their texts cut short.
        var bounded = status
        bounded.problems = status.problems.prefix(4).map { problem in
            var problem = problem
            problem.file = String(problem.file.prefix(300))
            problem.error = String(problem.error.prefix(500))
            return problem
        }
        var bytes = bounded.json.serializedBytes()
        guard bytes.count < Self.size else { return }
        bytes += [UInt8](repeating: 0x20, count: Self.size - 1 - bytes.count) + [0x0A]
        _ = pwrite(fd, bytes, bytes.count, 0)
    }

    /// The status a daemon last wrote at `path`; nil when there is none (no daemon ran there since this existed).
    static package func read(path: String) -> StorageStatus? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: size)
        let count = pread(fd, &bytes, size, 0)
        guard count > 0, let json = try? JSONParser.parse(Array(bytes[0..<count])) else { return nil }
        return StorageStatus(json: json)
    }
}
