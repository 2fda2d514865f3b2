import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One daemon per cache file: an exclusive `flock` on `<cache>.lock`, held for the daemon's lifetime (the kernel
/// drops it when the process ends, however it ends, so a crash leaves no stale lock). The file holds the holder's
/// pid, for the message a second daemon prints.
public final class CacheLock: Sendable {
    public let path: String
    private let descriptor: Int32

    public struct Held: Error, Sendable, CustomStringConvertible {
        public let cache: String
        public let lockFile: String
        public let holder: Int32?
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

    /// The lock file's path for a cache file.
    public static func path(forCache cache: String) -> String { cache + ".lock" }

    /// Takes the lock at once or throws `Held` (naming the holder's pid when the file tells it).
    public init(cache: String) throws {
        path = Self.path(forCache: cache)
        // 0600 whatever the umask: the file is beside the cache, whose neighbours are private too.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Failed(lockFile: path, reason: String(cString: strerror(errno))) }
        fchmod(fd, 0o600)
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            let holder = Self.readPID(fd)
            close(fd)
            if code == EWOULDBLOCK { throw Held(cache: cache, lockFile: path, holder: holder) }
            throw Failed(lockFile: path, reason: String(cString: strerror(code)))
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        descriptor = fd
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text)
    }

    deinit {
        close(descriptor)
    }
}
