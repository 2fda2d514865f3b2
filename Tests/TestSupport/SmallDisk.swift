import Foundation

/// A tmpfs of a few megabytes mounted for one test (tests run as root): a file system that fills up for real.
public final class SmallDisk: Sendable {
    public let path: String

    public init(megabytes: Int) throws {
        path = try makeTemporaryDirectory("thing-agent-small-disk")
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path]) else {
            rmdir(path)
            throw TestSupportError("cannot mount a tmpfs at \(path)")
        }
    }

    /// Writes a file until the disk has no room left; returns its path (remove it to give the room back).
    public func fill() throws -> String {
        let filler = path + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw TestSupportError("cannot create \(filler)") }
        defer { close(fd) }
        for chunk in [1 << 20, 4096] {
            let bytes = [UInt8](repeating: 0xAB, count: chunk)
            while write(fd, bytes, chunk) == chunk {}
        }
        guard errno == ENOSPC else { throw TestSupportError("filling \(path) stopped at \(String(cString: strerror(errno)))") }
        return filler
    }

    deinit {
        // Lazily: a daemon killed a moment ago may still hold files open there.
        _ = Self.run("/bin/umount", ["-l", path])
        rmdir(path)
    }

    /// Whether this machine lets the tests mount a tmpfs (root, and no container rule against it).
    public static let isAvailable: Bool = {
        guard let disk = try? SmallDisk(megabytes: 1) else { return false }
        _ = disk
        return true
    }()

    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) -> Bool {
        guard let child = try? ChildProcess.spawn(executable, arguments, stdout: "/dev/null", stderr: "/dev/null")
        else { return false }
        return child.wait() == 0
    }
}
