import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// sd_notify(3)'s protocol, written directly: one datagram of `KEY=value` lines to the unix socket named by
/// `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). A dozen lines of socket code instead of
/// linking libsystemd: the package needs no libsystemd0 at run time nor libsystemd-dev to build, and the protocol
/// is a stable, documented interface. Without `$NOTIFY_SOCKET` (not started by systemd) every call does nothing.
public struct SystemdNotifier: Sendable {
    public let socketPath: String?
    /// Half of `$WATCHDOG_USEC` when systemd watches this process (`$WATCHDOG_PID` unset or ours), else nil.
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if path != nil, forUs, let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 {
            watchdogInterval = .microseconds(Int64(clamping: usec / 2))
        } else {
            watchdogInterval = nil
        }
    }

    public var isEnabled: Bool { socketPath != nil }

    /// Sends the state lines (`READY=1`, `STATUS=...`); false when there is no socket or the send failed.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(socketPath.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard pathBytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let payload = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                payload.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), socketAddress, length) }
            }
        }
        return sent == payload.count
    }
}
