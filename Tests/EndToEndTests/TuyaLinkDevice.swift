import Foundation
import JSON
import TestSupport

/// A device run by Tuya's own C device SDK for TuyaLink (Tests/Interop/tuyalink/device.c, built with the SDK from
/// the vendor folder by `scripts/interop-tuyalink`): the SDK speaks TuyaLink over TLS, the program wires it to the
/// test's broker, answers sets and actions as firmware does, and prints what happens as JSON lines (`{"event":...}`;
/// the formats and commands are in device.c's header).
final class TuyaLinkDevice: ScriptedDevice {
    let process: DaemonProcess
    let id: String
    /// The file the program runs the commands appended to (`send`).
    let commands: String

    /// The SDK's HMAC reads the secret's first 16 bytes, whatever its length: test secrets are at least that long.
    static func secret(for deviceID: String) -> String {
        "secret-\(deviceID)-0123456789abcdef"
    }

    /// The program, built once per test process (cmake and make; `scripts/interop-tuyalink` holds a lock, so test
    /// processes running at once build it once).
    static func executable() async throws -> String {
        try await built.value
    }

    private static let built = Task<String, any Error> {
        let result = try await runCommand(repositoryRoot() + "/scripts/interop-tuyalink", [], timeout: .seconds(600))
        guard result.status == 0, let path = result.stdout.split(separator: "\n").last.map(String.init) else {
            throw TestSupportError("scripts/interop-tuyalink failed (\(result.status)): \(result.stderr)")
        }
        return path
    }

    /// Starts `deviceID` against `broker`'s TLS listener (`MosquittoBroker.Options.tls`, without a client
    /// certificate: the SDK has none), verifying it with the broker's CA as the SDK does. `flags`: `--sub ID`,
    /// `--no-auto-answer`, `--keepalive S` (60 by default, as Tuya's demos; a connection the broker dropped is
    /// noticed only at the next ping), `--timeout-ms N`, `--log`.
    convenience init(_ broker: MosquittoBroker, deviceID: String, secret: String? = nil, flags: [String] = [],
                     logPath: String) async throws {
        guard let tlsPort = broker.tlsPort, let certificates = broker.certificates else {
            throw TestSupportError("the TuyaLink SDK speaks TLS only: start the broker with Options.tls")
        }
        try await self.init(port: tlsPort, caFile: certificates.caFile, deviceID: deviceID, secret: secret,
                            flags: flags, logPath: logPath)
    }

    /// Starts `deviceID` against the TLS listener on 127.0.0.1:`port` whose server certificate `caFile` signed (the
    /// shipped TuyaLink listener, `ShippedBroker.tuyaLinkPort`).
    init(port: Int, caFile: String, deviceID: String, secret: String? = nil, flags: [String] = [],
         logPath: String) async throws {
        id = deviceID
        commands = logPath + ".commands"
        FileManager.default.createFile(atPath: commands, contents: nil)
        process = try DaemonProcess(try await Self.executable(), [
            "127.0.0.1", "\(port)", caFile, deviceID, secret ?? Self.secret(for: deviceID),
            "--commands", commands,
        ] + flags, logPath: logPath)
    }

    /// Waits until it is connected with its downlinks subscribed (`{"event":"connected"}`).
    func waitUntilConnected(timeout: Duration = .seconds(30)) async throws {
        try await waitFor("connection", timeout: timeout) { $0["event"] == "connected" }
    }

    /// SIGTERM (the program disconnects and exits 0), SIGKILL if it does not exit. Returns the exit status.
    @discardableResult
    func stop() async -> Int32? {
        process.signal(SIGTERM)
        if let status = await process.waitForExit(timeout: DaemonProcess.hangBound) { return status }
        process.signal(SIGKILL)
        return nil
    }
}
