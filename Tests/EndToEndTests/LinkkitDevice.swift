import Foundation
import JSON
import TestSupport

/// A device run by Alibaba's own device SDK, Linkkit (Tests/Interop/linkkit/linkkit_device.py, in the Python
/// environment `scripts/interop-linkkit` prepares, pinned): the SDK speaks Alink, the script only wires it to the
/// test's broker and prints what happens as JSON lines.
final class LinkkitDevice: Sendable {
    let process: DaemonProcess
    let id: String
    /// The file the script runs the commands appended to (`send`).
    let commands: String

    /// The environment's python, prepared on first use (a venv from Debian's python3 and the pinned requirements).
    static func python() async throws -> String {
        let result = try await runCommand(repositoryRoot() + "/scripts/interop-linkkit", [], timeout: .seconds(300))
        guard result.status == 0, let path = result.stdout.split(separator: "\n").last.map(String.init) else {
            throw TestSupportError("scripts/interop-linkkit failed: \(result.stderr)")
        }
        return path
    }

    /// Starts `<pk>.<dn>` against `broker` with the script's `flags` (`linkkit_gateway.py` takes its sub-device's
    /// product key, name and secret first).
    init(_ broker: MosquittoBroker, productKey: String, deviceName: String, flags: [String], logPath: String,
         script: String = "linkkit_device.py") async throws {
        id = "\(productKey).\(deviceName)"
        commands = logPath + ".commands"
        FileManager.default.createFile(atPath: commands, contents: nil)
        process = try DaemonProcess(try await Self.python(), [
            repositoryRoot() + "/Tests/Interop/linkkit/" + script, "127.0.0.1", "\(broker.port)", productKey,
            deviceName, "secret-\(deviceName)", "--no-stdin", "--commands", commands,
        ] + flags, logPath: logPath)
    }

    /// Has the script run `command` (one JSON object, `{"cmd":"logout"}`).
    func send(_ command: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: commands))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Array((command + "\n").utf8))
    }

    /// What it printed so far, one JSON object per line.
    var events: [JSONObject] {
        process.log.split(separator: "\n").compactMap { line in
            line.hasPrefix("{") ? (try? JSONParser.parse(Array(line.utf8)))?.objectValue : nil
        }
    }

    /// Waits until it printed an event that `condition` holds for, and returns it.
    @discardableResult
    func waitFor(_ what: String, timeout: Duration = .seconds(30),
                 _ condition: @escaping @Sendable (JSONObject) -> Bool) async throws -> JSONObject {
        do {
            try await waitUntil(timeout: timeout) { self.events.contains(where: condition) }
        } catch {
            throw TestSupportError("\(id): no \(what) within \(timeout); it printed:\n\(process.log)")
        }
        return events.first(where: condition)!
    }

    func stop() async {
        process.signal(SIGTERM)
        if await process.waitForExit(timeout: .seconds(10)) == nil { process.signal(SIGKILL) }
    }
}
