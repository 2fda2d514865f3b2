import Foundation
import JSON
import Testing
import TestSupport

// Helpers of the storage fault tests (StorageFaultTests.swift): a disk that really fills up, and the daemon's
// storage status as `thing-agent stats` shows it.

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
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0, "log: \(daemon.log.suffix(2000))",
                sourceLocation: sourceLocation)
        #expect(try await sqlite3(database, "PRAGMA integrity_check") == "ok", sourceLocation: sourceLocation)
    }
}

/// The permission bits of a file; nil when it does not exist.
func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
}
