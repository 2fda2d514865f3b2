import Foundation

/// The bench's own mosquitto: a process on a loopback port with the given configuration lines, its files in a
/// directory of their own. A port taken by something else shows as mosquitto exiting at start: another is tried.
final class BenchBroker: Sendable {
    let port: Int
    let directory: String
    private let process: Process

    var url: String { "mqtt://127.0.0.1:\(port)" }

    static func start(extraConfig: String) async throws -> BenchBroker {
        let directory = try benchDirectory("bench-broker")
        for _ in 0..<20 {
            let port = Int.random(in: 20_000...60_000)
            if let broker = try await BenchBroker(port: port, directory: directory, extraConfig: extraConfig).ready() {
                return broker
            }
        }
        throw BenchError("mosquitto could not listen on any of 20 ports; see \(directory)")
    }

    private init(port: Int, directory: String, extraConfig: String) throws {
        self.port = port
        self.directory = directory
        let lines = [
            "listener \(port) 127.0.0.1", "allow_anonymous true", "log_dest file \(directory)/mosquitto.log",
            // Started as root, mosquitto drops to user "mosquitto", which cannot read this private directory.
            geteuid() == 0 ? "user root" : "", extraConfig,
        ]
        try lines.joined(separator: "\n").write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/mosquitto")
        process.arguments = ["-c", directory + "/mosquitto.conf"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Self once mosquitto logged that it runs (its listener is open by then); nil when it exited instead.
    private func ready() async throws -> BenchBroker? {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { return nil }
            let log = (try? String(contentsOfFile: directory + "/mosquitto.log", encoding: .utf8)) ?? ""
            if log.contains(" running") { return self }
            try await Task.sleep(for: .milliseconds(20))
        }
        stop()
        throw BenchError("mosquitto did not start within 10 s; see \(directory)/mosquitto.log")
    }

    /// SIGKILL: mosquitto started from another process may ignore SIGTERM.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A fresh directory for the bench's files under the system temp directory.
func benchDirectory(_ name: String) throws -> String {
    let path = NSTemporaryDirectory() + "/\(name)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A process run to its end; its exit status and output.
func runProcess(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    return try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { process in
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            continuation.resume(returning: (process.terminationStatus, text))
        }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
}
