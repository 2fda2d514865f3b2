import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One daemon per cache file: an exclusive `flock` on `<cache>.lock`, held for the daemon's lifetime (the kernel
/// drops it when the process ends, however it ends, so a crash leaves no stale lock). The holder's pid comes from
/// /proc/locks; the file holds the MQTT client id of the daemon that holds it (so that a CLI command can send its
/// writes to that daemon's API), or nothing while a CLI command holds it for a write of its own.
public final class CacheLock: Sendable {
    public let path: String
    private let descriptor: Int32

    public struct Held: Error, Sendable, CustomStringConvertible {
        public let cache: String
        public let lockFile: String
        public let holder: Int32?
        /// The client id of the daemon that holds the lock; nil when a CLI command holds it (or it is unreadable).
        public let owner: String?
        public var description: String {
            let who = holder.map { "the daemon with pid \($0)" } ?? "another daemon"
            return "the cache \(cache) is in use by \(who) (lock \(lockFile)); one daemon per cache file"
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
    /// A lock held by a CLI command (no owner written: a command that does a daemon's work while none runs, such
    /// as a `transfer` waiting out its stall timeout) is waited for up to `commandWait`, checked every 100 ms
    /// (`waiting` hears the first refusal, `shouldStop` ends the wait); one held by a daemon is refused at once.
    public static func lockThenOpen<Opened>(cache: String, owner: String? = nil, commandWait: Duration = .zero,
                                            waiting: (Held) -> Void = { _ in },
                                            shouldStop: () -> Bool = { false },
                                            _ open: () throws -> Opened) throws -> (CacheLock, Opened) {
        let lockFile = path(forCache: cache)
        let making = access(lockFile, F_OK) != 0
        let lock: CacheLock
        do {
            lock = try waitingForCommands(cache: cache, owner: owner, commandWait, waiting, shouldStop)
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

    private static func waitingForCommands(cache: String, owner: String?, _ wait: Duration, _ waiting: (Held) -> Void,
                                           _ shouldStop: () -> Bool) throws -> CacheLock {
        let deadline = ContinuousClock.now + wait
        var told = false
        while true {
            do {
                return try CacheLock(cache: cache, owner: owner)
            } catch let held as Held where (held.owner ?? "").isEmpty && ContinuousClock.now < deadline && !shouldStop() {
                if !told { waiting(held) }
                told = true
                usleep(100_000)
            }
        }
    }

    /// The lock file's path for a cache file.
    public static func path(forCache cache: String) -> String { cache + ".lock" }

    /// Takes the lock at once or throws `Held` (naming the holder's pid when /proc/locks tells it). `owner` (the
    /// daemon's client id) is written into the file for as long as the lock is held; nil leaves it empty.
    public init(cache: String, owner: String? = nil) throws {
        path = Self.path(forCache: cache)
        // 0600 whatever the umask: the file is beside the cache, whose neighbours are private too.
        let fd = PrivateFiles.open(path, flags: O_RDWR)
        guard fd >= 0 else { throw Failed(lockFile: path, reason: String(cString: strerror(errno))) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = Self.holder(of: fd)
            let owner = Self.owner(of: fd)
            close(fd)
            if code == EWOULDBLOCK { throw Held(cache: cache, lockFile: path, holder: holder, owner: owner) }
            throw Failed(lockFile: path, reason: String(cString: strerror(code)))
        }
        let text = Array((owner ?? "").utf8)
        guard ftruncate(fd, 0) == 0, text.isEmpty || pwrite(fd, text, text.count, 0) == text.count else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failed(lockFile: path, reason: reason)
        }
        descriptor = fd
    }

    /// What the holder wrote into the file (its client id); nil when empty or unreadable.
    private static func owner(of fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// The pid /proc/locks gives for the FLOCK on the file `fd` is open on (`1: FLOCK ADVISORY WRITE 812 08:01:1234
    /// 0 EOF`: the pid, then the device as major:minor in hex and the inode).
    private static func holder(of fd: Int32) -> Int32? {
        var info = stat()
        guard fstat(fd, &info) == 0, let table = readWhole("/proc/locks") else { return nil }
        let device = UInt64(info.st_dev)
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let file = String(format: "%02llx:%02llx:%llu", major, minor, UInt64(info.st_ino))
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[5] == file else { continue }
            return Int32(fields[4])
        }
        return nil
    }

    /// A /proc file read to its end: its size reads as 0, and on a busy machine /proc/locks holds thousands of
    /// lines, so one fixed-size read would miss the holder's.
    private static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? String(decoding: bytes, as: UTF8.self) : nil }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    deinit {
        close(descriptor)
    }
}
