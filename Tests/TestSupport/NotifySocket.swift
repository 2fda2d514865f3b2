import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A unix datagram socket standing in for systemd's `$NOTIFY_SOCKET`: it records every datagram a daemon sends.
public final class NotifySocket: Sendable {
    public let path: String
    private let descriptor: Int32
    private let received = Mutex<[String]>([])
    private let closed = Atomic<Bool>(false)

    public init(directory: String) throws {
        path = directory + "/notify.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(fd)
            throw TestSupportError("socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            Glibc.close(fd)
            throw TestSupportError("bind \(path): \(String(cString: strerror(errno)))")
        }
        // A receive timeout lets the reading thread notice `close()`.
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        descriptor = fd
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !closed.load(ordering: .relaxed) {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    let text = String(decoding: buffer[..<count], as: UTF8.self)
                    received.withLock { $0.append(text) }
                }
            }
            Glibc.close(fd)
        }
        thread.start()
    }

    /// Every datagram so far, in arrival order.
    public var datagrams: [String] { received.withLock { $0 } }

    /// Every `KEY=value` line so far, in arrival order.
    public var lines: [String] { datagrams.flatMap { $0.split(separator: "\n").map(String.init) } }

    public func close() {
        closed.store(true, ordering: .relaxed)
        unlink(path)
    }

    deinit {
        close()
    }
}
