import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn, so tests get a plain pid to SIGKILL / SIGSTOP and wait for.
struct ChildProcess: Sendable {
    let pid: pid_t

    /// Starts `path` with `arguments`, stdin from /dev/null, stdout and stderr appended to `outputFile`.
    /// The child gets a clean signal mask and only fds 0-2: a broker must not inherit the test's client sockets
    /// (it would keep them open after the client closes them).
    static func spawn(_ path: String, _ arguments: [String], outputFile: String) throws -> ChildProcess {
        try spawn(path, arguments, stdout: outputFile, stderr: nil)
    }

    /// Starts `path` with `arguments` as a shell would: a clean signal mask and default dispositions (the test
    /// process's threads block most signals, and a child would inherit that), stdin from /dev/null, stdout appended
    /// to the file `stdout`, stderr to `stderr` (nil: the same file), the test's environment with `environment`
    /// over it, in `directory` (nil: the test's), only fds 0-2 inherited, in a process group of its own.
    ///
    /// Not Foundation's `Process`: its `run()` on this toolchain reads /proc/self/fd entries past glibc's buffer
    /// and crashes now and then (a SIGSEGV in memmove), which took down the whole test process.
    static func spawn(_ path: String, _ arguments: [String], stdout: String, stderr: String?,
                      environment: [String: String] = [:], directory: String? = nil) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let stderr {
            posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        closeInheritedDescriptors(&actions)
        if let directory { try changeDirectory(&actions, directory) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw TestSupportError("cannot start \(path): \(String(cString: strerror(rc)))") }
        return ChildProcess(pid: pid)
    }

    /// The exit status (as `wait`) when the process has ended, reaping it; nil while it runs.
    func exited() -> Int32? {
        var status: Int32 = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, WNOHANG) } while result == -1 && errno == EINTR
        guard result == pid else { return result == -1 ? -1 : nil }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// glibc 2.29+'s posix_spawn_file_actions_addchdir_np, looked up at run time as `closeInheritedDescriptors` is.
    private static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, _ directory: String) throws {
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>,
                                             UnsafePointer<CChar>) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
            throw TestSupportError("this C library cannot start a process in another directory")
        }
        _ = unsafeBitCast(symbol, to: AddChdir.self)(&actions, directory)
    }

    /// Runs a command to completion; throws with its output when it exits non-zero.
    @discardableResult
    static func run(_ path: String, _ arguments: [String], in directory: String) throws -> String {
        let output = directory + "/command-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { unlink(output) }
        let child = try spawn(path, arguments, outputFile: output)
        let status = child.wait()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw TestSupportError("\(path) \(arguments.joined(separator: " ")) exited with \(status): \(text)")
        }
        return text
    }

    /// Waits for the process to exit and returns its exit status (128 + signal when killed).
    @discardableResult
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            if errno != EINTR { return -1 }
        }
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    func signal(_ signal: Int32) {
        kill(pid, signal)
    }

    /// glibc 2.34+ has posix_spawn_file_actions_addclosefrom_np but Swift's Glibc module does not export it;
    /// look it up at run time.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }
}

/// A failure of the test support itself (broker did not start, a command failed).
public struct TestSupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
