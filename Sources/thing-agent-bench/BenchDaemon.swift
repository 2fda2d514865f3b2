import Foundation

/// A `thing-agent run` started by the bench, its output going to a log file the bench reads to see it subscribed.
final class BenchDaemon: @unchecked Sendable {
    // Process is not Sendable; only its pid and running state are read, which Foundation makes thread-safe.
    private let process = Process()
    let logPath: String

    init(_ executable: String, _ arguments: [String], environment: [String: String], logPath: String) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// The exit status; nil when it did not exit within `timeout`.
    func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// A command run to its end, with what it printed (stdout and stderr through files, so a large output never
/// fills a pipe).
func runCaptured(_ executable: String, _ arguments: [String]) async throws
    -> (status: Int32, stdout: String, stderr: String) {
    let directory = try benchDirectory("bench-command")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let outPath = directory + "/stdout", errPath = directory + "/stderr"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    process.standardInput = FileHandle.nullDevice
    try process.run()
    while process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return (process.terminationStatus, out, err)
}
