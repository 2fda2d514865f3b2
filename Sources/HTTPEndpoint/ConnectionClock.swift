internal import CMicroHTTPD
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Ends every connection of an `HTTPServer` that lasts longer than `limit`, request and answer together.
///
/// libmicrohttpd tells when a connection starts and closes (MHD_OPTION_NOTIFY_CONNECTION, on its thread); a timer
/// shuts down the socket of one past its time, which libmicrohttpd then sees as the client gone and closes. The
/// socket is shut down under the same lock its close is announced under, so an old connection's number is never
/// used for a new one's socket.
final class ConnectionClock: Sendable {
    private struct Open {
        let socket: Int32
        let started: ContinuousClock.Instant
        var cut = false
    }

    let limit: Duration
    private let library: MicroHTTPD
    private let open = Mutex<[UInt: Open]>([:])
    private let stopped = Atomic(false)

    init(limit: Duration, library: MicroHTTPD) {
        self.limit = limit
        self.library = library
    }

    /// Connections open now (for tests).
    var count: Int { open.withLock { $0.count } }

    /// Checks every quarter of the limit (at most a second), so a connection lasts at most a quarter longer.
    func start() {
        let interval = min(limit / 4, .seconds(1))
        let milliseconds = max(1, Int(interval.components.seconds * 1000
                                      + interval.components.attoseconds / 1_000_000_000_000_000))
        schedule(every: milliseconds)
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
    }

    private func schedule(every milliseconds: Int) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [weak self] in
            guard let self, !self.stopped.load(ordering: .relaxed) else { return }
            self.cutOverdue()
            self.schedule(every: milliseconds)
        }
    }

    private func cutOverdue() {
        let now = ContinuousClock.now
        open.withLock { open in
            for (key, connection) in open where !connection.cut && now - connection.started > limit {
                shutdown(connection.socket, Int32(SHUT_RDWR))
                open[key]?.cut = true
            }
        }
    }

    private func started(_ connection: OpaquePointer) {
        let socket = thing_agent_connection_fd(library.connectionInfo, connection)
        guard socket >= 0 else { return }
        open.withLock { $0[UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))] =
            Open(socket: socket, started: .now) }
    }

    private func closed(_ connection: OpaquePointer) {
        _ = open.withLock { $0.removeValue(forKey: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection)))) }
    }

    /// libmicrohttpd's connection notice, with the clock as `cls`: 0 started, 1 closed
    /// (MHD_ConnectionNotificationCode, imported without its case names).
    static let notify: MHD_NotifyConnectionCallback = { cls, connection, _, code in
        guard let cls, let connection else { return }
        let clock = Unmanaged<ConnectionClock>.fromOpaque(cls).takeUnretainedValue()
        switch code.rawValue {
        case 0: clock.started(connection)
        case 1: clock.closed(connection)
        default: break
        }
    }
}
