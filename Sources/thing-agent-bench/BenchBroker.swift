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

    /// CPU seconds (user + system) the broker has used so far.
    var cpuSeconds: Double {
        ProcessUsage.cpuSeconds(statFile: "/proc/\(process.processIdentifier)/stat") ?? .nan
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

/// What a process run to its end left: its exit status and its output.
struct ProcessOutput {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// A process run to its end, woken by its exit (not by polling, which would blur the figures).
func runProcess(_ executable: String, _ arguments: [String]) async throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = FileHandle.nullDevice
    // stderr into a file, stdout through a pipe read to its end before waiting: a child that filled either pipe
    // while the other was read would never exit.
    let errorsPath = NSTemporaryDirectory() + "/bench-stderr-\(UUID().uuidString)"
    _ = FileManager.default.createFile(atPath: errorsPath, contents: nil)
    defer { try? FileManager.default.removeItem(atPath: errorsPath) }
    let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: errorsPath))
    let output = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    try errors.close()
    let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let stderr = (try? String(contentsOfFile: errorsPath, encoding: .utf8)) ?? ""
    return ProcessOutput(status: process.terminationStatus, stdout: stdout, stderr: stderr)
}

/// A long-running process (the daemon) with its output in a log file.
final class BenchDaemon: Sendable {
    private let process: Process
    private let logPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = log
        process.standardError = log
        try process.run()
        try log.close()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// The exit status, or nil when it still runs after `timeout` (it is then killed).
    func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }
}
