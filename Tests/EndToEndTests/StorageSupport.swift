import Foundation
import JSON
import Testing
import TestSupport

// Helpers of the storage fault tests (StorageFaultTests.swift): a disk that really fills up, and the daemon's
// storage status as `thing-agent stats` shows it.

/// A tmpfs of a few megabytes mounted for one test (tests run as root): a file system that fills up for real.
final class SmallDisk: Sendable {
    let path: String

    init(megabytes: Int) throws {
        path = try makeTemporaryDirectory("thing-agent-small-disk")
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0700", "tmpfs", path]) else {
            rmdir(path)
            throw TestSupportError("cannot mount a tmpfs at \(path)")
        }
    }

    /// Writes a file until the disk has no room left; returns its path (remove it to give the room back).
    func fill() throws -> String {
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
    static let isAvailable: Bool = {
        guard let disk = try? SmallDisk(megabytes: 1) else { return false }
        _ = disk
        return true
    }()

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}

extension AgentHarness {
    /// The `storage` object of `thing-agent stats --json`.
    func storageStatus() async throws -> JSONObject {
        let stats = try await stats()
        guard let storage = stats["storage"]?.objectValue else {
            throw TestSupportError("no storage status in stats: \(JSONValue.object(stats).serialized())")
        }
        return storage
    }

    /// Waits until `stats` shows the storage in `state` ("ok", "degraded", "holding"), with a problem naming
    /// `file` unless the state is ok.
    @discardableResult
    func waitForStorage(_ state: String, naming file: String? = nil, timeout: Duration = .seconds(30))
        async throws -> JSONObject {
        let deadline = ContinuousClock.now + timeout
        while true {
            let storage = try await storageStatus()
            let files = storage["problems"]?.arrayValue?.compactMap { $0["file"]?.stringValue } ?? []
            if storage["state"]?.stringValue == state, file.map({ files.contains($0) }) ?? true { return storage }
            if ContinuousClock.now > deadline {
                throw TestSupportError("storage is \(JSONValue.object(storage).serialized()), not \(state); "
                    + "log: \(daemon?.log.suffix(3000) ?? "")")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Stops the daemon with SIGTERM; it must exit 0, leaving a file that passes `PRAGMA integrity_check`.
    func stopCleanly(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let daemon = try #require(daemon, sourceLocation: sourceLocation)
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: .seconds(20)) == 0, "log: \(daemon.log.suffix(2000))",
                sourceLocation: sourceLocation)
        #expect(try await sqlite3(database, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
    }
}

/// The permission bits of a file; nil when it does not exist.
func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
}
