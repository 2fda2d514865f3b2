import Foundation
import JSON
import TestSupport

/// A device run by Alibaba's own device SDK, Linkkit (Tests/Interop/linkkit/linkkit_device.py, in the Python
/// environment `scripts/interop-linkkit` prepares, pinned): the SDK speaks Alink, the script only wires it to the
/// test's broker and prints what happens as JSON lines.
final class LinkkitDevice: ScriptedDevice {
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

    func stop() async {
        process.signal(SIGTERM)
        if await process.waitForExit(timeout: .seconds(10)) == nil { process.signal(SIGKILL) }
    }
}
