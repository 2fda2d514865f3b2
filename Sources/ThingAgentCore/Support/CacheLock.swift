import FoundationEssentials
import Platform
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What holds a cache's lock, as its lock file says: the daemon (by client id, so that a CLI command can send its
/// writes to that daemon's API), or a CLI command doing the daemon's work itself while no daemon runs.
public enum CacheLockHolder: Sendable, Equatable {
    case daemon(clientID: String)
    /// The subcommand's name (`set`, `edit`...).
    case command(String)
}

/// One daemon per cache file: an exclusive `flock` on `<cache>.lock`, held for the daemon's lifetime (the kernel
/// drops it when the process ends, however it ends, so a crash leaves no stale lock). The holder's pid comes from
/// /proc/locks; the file says who holds it (`CacheLockHolder`, with its pid), and is emptied when the holder lets go.
public final class CacheLock: Sendable {
    public let path: String
    /// -1 once released.
    private let descriptor: Atomic<Int32>

    public struct Held: Error, Sendable, CustomStringConvertible {
        public let cache: String
        public let lockFile: String
        /// The holder's pid, from /proc/locks.
        public let holder: Int32?
        /// Who the lock file says holds it; nil while the holder has not written it yet (it has just taken the
        /// lock, and the file may still name the one before), or when it is unreadable.
        public let heldBy: CacheLockHolder?
        /// What the file says even where its pid is not the holder's (a daemon in another pid namespace).
        public let written: CacheLockHolder?

        /// The client id of the daemon that holds the lock; nil when a CLI command holds it (or it is unknown).
        public var owner: String? {
            if case .daemon(let clientID) = heldBy { clientID } else { nil }
        }

        /// `written` is what the file says; a pid in it that is not the holder's means it still names the one before.
        init(cache: String, lockFile: String, holder: Int32?, written: (holder: CacheLockHolder?, pid: Int32?)) {
            self.cache = cache
            self.lockFile = lockFile
            self.holder = holder
            let current = written.pid == nil || holder == nil || written.pid == holder
            heldBy = current ? written.holder : nil
            self.written = written.holder
        }

        /// Whether the file says a daemon holds it (then a second daemon is refused, not made to wait).
        public var namesADaemon: Bool {
            if case .daemon = heldBy ?? written { true } else { false }
        }

        public var description: String {
            let pid = holder.map { " with pid \($0)" } ?? ""
            let lock = "(lock \(lockFile))"
            switch heldBy {
            case .daemon:
                return "the cache \(cache) is in use by the daemon\(pid) \(lock); one daemon per cache file"
            case .command(let name):
                return "the cache \(cache) is in use by the command 'thing-agent \(name)'\(pid) \(lock), which "
                    + "holds it while it runs with no daemon; try again once it has ended"
            case nil:
                return "the cache \(cache) is in use by another process\(pid) \(lock)"
            }
        }
    }

    public struct Failed: Error, Sendable, CustomStringConvertible {
        public let lockFile: String
        public let reason: String
        public var description: String { "cannot lock \(lockFile): \(reason)" }
    }

    /// Takes the lock for `cache`, and only then runs `open` (which opens and migrates the cache): a second daemon
    /// is refused before it touches the file. Where the lock file cannot be made (a missing or read-only
    /// directory) the cache could not be opened either, and `open`'s error names the cause in the words used for the
    /// cache; a lock file made here for a cache that is then refused is removed, leaving the directory as it was.
    ///
    /// A lock held by a CLI command (one that does a daemon's work while none runs, such as a `transfer` waiting
    /// out its stall timeout) is waited for up to `commandWait`, checked every 100 ms (`waiting` hears the first
    /// refusal, `shouldStop` ends the wait); one the file says a daemon holds is refused at once.
    public static func lockThenOpen<Opened>(cache: String, holder: CacheLockHolder, commandWait: Duration = .zero,
                                            waiting: (Held) -> Void = { _ in },
                                            shouldStop: () -> Bool = { false },
                                            _ open: () throws -> Opened) throws -> (CacheLock, Opened) {
        let lockFile = path(forCache: cache)
        let making = access(lockFile, F_OK) != 0
        let lock: CacheLock
        do {
            lock = try waitingForCommands(cache: cache, holder: holder, commandWait, waiting, shouldStop)
        } catch let failed as Failed {
            _ = try open()
            throw failed
        }
        do {
            return (lock, try open())
        } catch {
            if making { unlink(lockFile) }
            throw error
        }
    }

    private static func waitingForCommands(cache: String, holder: CacheLockHolder, _ wait: Duration,
                                           _ waiting: (Held) -> Void, _ shouldStop: () -> Bool) throws -> CacheLock {
        let deadline = ContinuousClock.now + wait
        var told = false
        while true {
            do {
                return try CacheLock(cache: cache, holder: holder)
            } catch let held as Held where !held.namesADaemon && ContinuousClock.now < deadline && !shouldStop() {
                if !told { waiting(held) }
                told = true
                usleep(100_000)
            }
        }
    }

    /// The lock file's path for a cache file.
    public static func path(forCache cache: String) -> String { cache + ".lock" }

    /// Takes the lock at once or throws `Held` (naming the holder's pid when /proc/locks tells it, and what it
    /// is when the lock file says). `holder` is written into the file for as long as the lock is held.
    public init(cache: String, holder: CacheLockHolder) throws {
        path = Self.path(forCache: cache)
        // 0600 whatever the umask: the file is beside the cache, whose neighbours are private too.
        let fd = PrivateFiles.open(path, flags: O_RDWR)
        guard fd >= 0 else { throw Failed(lockFile: path, reason: String(cString: strerror(errno))) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            // Held by someone: a line the table's read missed is worth looking for again.
            let pid = Self.holder(of: fd, reads: code == EWOULDBLOCK ? 3 : 1)
            let written = Self.written(in: fd)
            close(fd)
            if code == EWOULDBLOCK {
                throw Held(cache: cache, lockFile: path, holder: pid, written: written)
            }
            throw Failed(lockFile: path, reason: String(cString: strerror(code)))
        }
        let text = Array(Self.text(holder, pid: getpid()).utf8)
        guard ftruncate(fd, 0) == 0, pwrite(fd, text, text.count, 0) == text.count else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failed(lockFile: path, reason: reason)
        }
        descriptor = Atomic(fd)
    }

    /// The lock file's text: `holder: daemon` or `holder: command`, `pid: N`, then `client-id: C` or `command: NAME`.
    static package func text(_ holder: CacheLockHolder, pid: Int32) -> String {
        switch holder {
        case .daemon(let clientID): "holder: daemon\npid: \(pid)\nclient-id: \(clientID)\n"
        case .command(let name): "holder: command\npid: \(pid)\ncommand: \(name)\n"
        }
    }

    /// What the holder wrote into the file; a file of the earlier form (the daemon's client id alone) names a daemon.
    ///
    /// The holder truncates the file and then writes it, so a reader may see a prefix of the text. Only lines that
    /// end in a newline count: a value cut off mid-line (`client-id: thing-ag`) is not yet written, never a
    /// shorter name, and the reader waits for the rest as for an empty file.
    static package func parse(_ text: String) -> (holder: CacheLockHolder?, pid: Int32?) {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            // One space after the colon is the format's; more belong to the value.
            var value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
            fields[String(line[..<colon])] = String(value)
        }
        let pid = fields["pid"].flatMap { Int32($0) }
        switch fields["holder"] {
        case "daemon": return (fields["client-id"].map { .daemon(clientID: $0) }, pid)
        case "command": return (fields["command"].map { .command($0) }, pid)
        case nil where isEarlierForm(text): return (.daemon(clientID: text), nil)
        default: return (nil, pid)
        }
    }

    /// A client id alone, as earlier versions wrote it: one line without a newline, and not the start of the
    /// current form's first line being written.
    private static func isEarlierForm(_ text: String) -> Bool {
        !text.isEmpty && !text.contains("\n") && !"holder: ".hasPrefix(text) && !text.hasPrefix("holder: ")
    }

    private static func written(in fd: Int32) -> (holder: CacheLockHolder?, pid: Int32?) {
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return (nil, nil) }
        return parse(String(decoding: buffer[..<count], as: UTF8.self))
    }

    /// The pid /proc/locks gives for the FLOCK on the file `fd` is open on (`1: FLOCK ADVISORY WRITE 812 08:01:1234
    /// 0 EOF`: the pid, then the device as major:minor in hex and the inode). The kernel hands the table out a page
    /// at a time: a lock taken or let go elsewhere between two pages shifts the rest, and a line can be missed, so
    /// a caller that knows the lock is held reads it up to `reads` times.
    private static func holder(of fd: Int32, reads: Int = 1) -> Int32? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let file = major.hex(width: 2) + ":" + minor.hex(width: 2) + ":" + String(UInt64(info.st_ino))
        for _ in 0..<reads {
            guard let table = readWhole("/proc/locks") else { return nil }
            for line in table.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count >= 6, fields[1] == "FLOCK", fields[5] == file else { continue }
                return Int32(fields[4])
            }
        }
        return nil
    }

    /// A /proc file read to its end: its size reads as 0, and on a busy machine /proc/locks holds thousands of
    /// lines, so one fixed-size read would miss the holder's.
    private static func readWhole(_ path: String) -> String? {
        (try? readWholeFile(path)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Lets the lock go (once; later calls do nothing), emptying the file first so that it never names a holder
    /// that has gone. A crash leaves the name, which the next holder replaces; its pid tells a reader meanwhile
    /// that it is stale.
    public func release() {
        let fd = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        guard fd >= 0 else { return }
        _ = ftruncate(fd, 0)
        close(fd)
    }

    /// Who holds the lock of `cache` now, found without taking it (so that a daemon starting meanwhile finds it
    /// free); nil when no one does. Where /proc/locks cannot be read, the file is taken at its word.
    public static func currentHolder(cache: String) -> Held? {
        let lockFile = path(forCache: cache)
        let fd = open(lockFile, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let text = written(in: fd)
        let pid = holder(of: fd)
        guard pid != nil || access("/proc/locks", R_OK) != 0 else { return nil }
        return Held(cache: cache, lockFile: lockFile, holder: pid, written: text)
    }

    deinit {
        release()
    }
}
