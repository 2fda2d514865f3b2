import Foundation
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

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it).
public func freeLoopbackPort() throws -> Int {
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
func loopbackPortAccepts(_ port: Int) -> Bool {
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
