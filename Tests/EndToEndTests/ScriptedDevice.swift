import Foundation
import JSON
import TestSupport

/// A device on a vendor's own SDK run by a program of the tests' (Linkkit's Python script, the TuyaLink C program):
/// it runs the commands appended to a file and prints what happens as JSON lines.
protocol ScriptedDevice: Sendable {
    var process: DaemonProcess { get }
    var id: String { get }
    /// The file the program runs the commands appended to (`send`).
    var commands: String { get }
}

extension ScriptedDevice {
    /// Has the program run `command` (one JSON object, `{"cmd":"logout"}`).
    func send(_ command: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: commands))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Array((command + "\n").utf8))
    }

    /// What it printed so far, one JSON object per line (other lines, such as an SDK's log, skipped).
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
}
