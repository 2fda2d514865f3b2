import Foundation

/// The directory holding the built products (`thing-agent`), next to the test bundle.
public func productsDirectory() -> URL {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var directory = testBinary.deletingLastPathComponent()
    // `swift test` may run `<name>.xctest` (a file on Linux, a bundle on macOS).
    while directory.pathExtension == "xctest" || directory.lastPathComponent == "Contents"
        || directory.lastPathComponent == "MacOS" {
        directory = directory.deletingLastPathComponent()
    }
    return directory
}

/// The `thing-agent` executable built with the tests.
public func thingAgentExecutable() -> String {
    productsDirectory().appendingPathComponent("thing-agent").path
}

/// What a finished command printed and how it ended.
public struct ProcessResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs a command to completion (killed after `timeout`), capturing its output.
/// `directory`: the working directory (default: the test process's).
public func runCommand(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                       timeout: Duration = .seconds(30), directory: String? = nil) async throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let directory = try makeTemporaryDirectory("thing-agent-run")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let outPath = directory + "/stdout", errPath = directory + "/stderr"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    // Closed here: Foundation's Process keeps them open long after the child ended, and a suite that runs many
    // commands in parallel would hold thousands of descriptors for nothing.
    defer {
        try? outHandle.close()
        try? errHandle.close()
    }
    process.standardOutput = outHandle
    process.standardError = errHandle
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let deadline = ContinuousClock.now + timeout
    while process.isRunning {
        if ContinuousClock.now > deadline {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ProcessTimeout(command: ([executable] + arguments).joined(separator: " "))
        }
        try await Task.sleep(for: .milliseconds(10))
    }
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return ProcessResult(status: process.terminationStatus, stdout: out, stderr: err)
}

public struct ProcessTimeout: Error, CustomStringConvertible {
    public let command: String
    public var description: String { "timed out: \(command)" }
}

/// A long-running child (the daemon), killed when released.
public final class DaemonProcess: @unchecked Sendable {
    // Process is not Sendable; this wrapper only reads its pid and status, which Foundation makes thread-safe.
    private let process: Process
    public let logPath: String

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                logPath: String, directory: String? = nil) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// How long a test waits for an exit it expects before it calls it a hang: far beyond what load (the suite run
    /// twice at once on two cores) makes of a stop, far inside the tests' time limits. How quickly a stop ends is
    /// the bench's figure (`thing-agent-bench --only stop`), never a test's.
    public static let hangBound: Duration = .seconds(30)

    public func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// Waits for the exit; nil when it did not exit within `timeout`.
    public func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return process.terminationStatus
    }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
