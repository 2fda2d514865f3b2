import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

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
    let scratch = try makeTemporaryDirectory("thing-agent-run")
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let outPath = scratch + "/stdout", errPath = scratch + "/stderr"
    let child = try ChildProcess.spawn(executable, arguments, stdout: outPath, stderr: errPath,
                                       environment: environment, directory: directory)
    let deadline = ContinuousClock.now + timeout
    var status = child.exited()
    while status == nil {
        if ContinuousClock.now > deadline {
            child.signal(SIGKILL)
            child.wait()
            throw ProcessTimeout(command: ([executable] + arguments).joined(separator: " "))
        }
        try await Task.sleep(for: .milliseconds(10))
        status = child.exited()
    }
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return ProcessResult(status: status ?? -1, stdout: out, stderr: err)
}

public struct ProcessTimeout: Error, CustomStringConvertible {
    public let command: String
    public var description: String { "timed out: \(command)" }
}

/// A long-running child (the daemon), killed when released.
public final class DaemonProcess: Sendable {
    private let child: ChildProcess
    /// The exit status once it was reaped.
    private let status = Mutex<Int32?>(nil)
    public let logPath: String
    /// Where this process's output begins in the log file (a restart appends to the same file).
    private let logStart: Int

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                logPath: String, directory: String? = nil) throws {
        self.logPath = logPath
        logStart = ((try? FileManager.default.attributesOfItem(atPath: logPath))?[.size] as? Int) ?? 0
        child = try ChildProcess.spawn(executable, arguments, stdout: logPath, stderr: nil,
                                       environment: environment, directory: directory)
    }

    public var pid: Int32 { child.pid }

    /// Reaps the child when it has ended (once) and says whether it still runs.
    public var isRunning: Bool { exitStatus == nil }

    private var exitStatus: Int32? {
        status.withLock { status in
            if status == nil { status = child.exited() }
            return status
        }
    }

    /// How long a test waits for an exit it expects before it calls it a hang: far beyond what load (the suite run
    /// twice at once on two cores) makes of a stop, far inside the tests' time limits. How quickly a stop ends is
    /// the bench's figure (`thing-agent-bench --only stop`), never a test's.
    public static let hangBound: Duration = .seconds(30)

    public func signal(_ number: Int32) {
        if isRunning { kill(child.pid, number) }
    }

    /// Waits for the exit; nil when it did not exit within `timeout`.
    public func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = exitStatus { return status }
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// What this process wrote to its log file (not what an earlier process wrote there before it).
    public var log: String {
        guard let data = FileManager.default.contents(atPath: logPath), data.count >= logStart else { return "" }
        return String(decoding: data.dropFirst(logStart), as: UTF8.self)
    }

    deinit {
        if isRunning {
            kill(child.pid, SIGKILL)
            let code = child.wait()
            status.withLock { $0 = code }
        }
    }
}
