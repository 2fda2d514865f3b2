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
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputFile, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard rc == 0 else { throw TestSupportError("cannot start \(path): \(String(cString: strerror(rc)))") }
        return ChildProcess(pid: pid)
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
