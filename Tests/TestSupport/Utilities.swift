import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Creates a fresh directory under the system temp directory and returns its path.
public func makeTemporaryDirectory(_ prefix: String = "thing-agent-test") throws -> String {
    var template = Array((NSTemporaryDirectory() + "/\(prefix)-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard let made else { throw TestSupportError("mkdtemp failed: \(String(cString: strerror(errno)))") }
    return String(cString: made)
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it), and that no other test in this process
/// or in another test process running at the same time has been given: it stays reserved until
/// `releaseLoopbackPort` (a broker's `stop()` releases its ports) or the process exits.
///
/// Without the reservation, the port of a broker that a test killed and is about to restart could be handed to
/// another test's new broker; one of the two then failed to bind, found the port accepting anyway (the other's
/// broker) and ran against the wrong broker, whose test then killed it under the first test's clients ("connection
/// lost before the broker acknowledged", seen in the suite under load).
public func freeLoopbackPort() throws -> Int {
    for _ in 0..<200 {
        let port = try kernelPickedPort()
        if PortReservations.reserve(port) { return port }
    }
    throw TestSupportError("no unreserved free port after 200 tries")
}

/// Gives a port from `freeLoopbackPort` back.
public func releaseLoopbackPort(_ port: Int) {
    PortReservations.release(port)
}

/// Reservations as locked files in a directory every test process shares; the kernel drops a lock when its process
/// exits, so a crashed run leaves nothing reserved. Released when done with: every lock is a line of the system's
/// /proc/locks, which other programs read (the agent does, to name a cache lock's holder).
enum PortReservations {
    private static let held = Mutex<[Int: Int32]>([:])
    private static let directory = "/tmp/thing-agent-test-ports"

    static func release(_ port: Int) {
        guard let fd = held.withLock({ $0.removeValue(forKey: port) }) else { return }
        close(fd)
    }

    static func reserve(_ port: Int) -> Bool {
        mkdir(directory, 0o777)
        let fd = open("\(directory)/\(port)", O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
        guard fd >= 0 else { return true }  // nowhere to record it: go without, as before
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return false
        }
        held.withLock { $0[port] = fd }
        return true
    }
}

private func kernelPickedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw TestSupportError("bind failed: \(String(cString: strerror(errno)))") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// True when something accepts TCP connections on 127.0.0.1:port.
public func loopbackPortAccepts(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// Polls `condition` every 20 ms until it holds; throws when `timeout` passes first.
public func waitUntil(
    timeout: Duration = .seconds(5), _ condition: @Sendable () async -> Bool,
    sourceLocation: String = #fileID, line: Int = #line
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        if await condition() { return }
        if clock.now >= deadline {
            throw TestSupportError("condition not met within \(timeout) (\(sourceLocation):\(line))")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}
