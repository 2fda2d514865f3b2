internal import CMicroHTTPD
import FoundationEssentials
#if canImport(Glibc)
import Glibc
import Synchronization
#endif

/// A small read-only HTTP server over libmicrohttpd: GET on a few paths, each answered by a handler. One internal
/// thread of libmicrohttpd's polls every connection (a slow client holds up nobody), at most `connectionLimit`
/// connections and `connectionsPerClient` from one address, each closed after `connectionTimeout` seconds idle and
/// after `timeLimit` in all. Request bodies are not read.
///
/// The last two are what keeps a scrape answered while slow clients hang on: libmicrohttpd's idle timeout starts
/// again at every byte, so a client that sends one header line every few seconds would hold its connection for
/// good, and 32 of them every connection there is.
///
/// A module of its own so that libmicrohttpd's C headers (which pull in the system's socket headers) are imported
/// by this module alone, not by every file of the agent.
public final class HTTPServer: Sendable {
    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]

        public init(status: Int, contentType: String, body: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    public typealias Handler = @Sendable () -> Response

    public static let connectionLimit: UInt32 = 32
    public static let connectionsPerClient: UInt32 = 8
    static let connectionTimeout: UInt32 = 10

    /// `host:port` as given (for messages).
    public let address: String
    private let routes: [String: Handler]
    private let daemon: DaemonHandle
    private let library: MicroHTTPD
    private let clock: ConnectionClock

    /// Binds `host` (an address or a name) and `port` and starts serving; throws with the reason when they cannot
    /// be used. `address` is how to name them in messages.
    /// `timeLimit`: the longest a connection may last, request and answer together (10 s by default).
    public init(host: String, port: Int, address: String, routes: [String: Handler],
                timeLimit: Duration = .seconds(10)) throws {
        self.address = address
        self.routes = routes
        daemon = DaemonHandle()
        let library = try MicroHTTPD.shared.get()
        self.library = library
        clock = ConnectionClock(limit: timeLimit, library: library)
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard var socketAddress = SocketAddress(host: host, port: port) else {
            throw HTTPServerError(message: "cannot resolve the metrics address \(address)")
        }
        var flags = UInt32(MHD_USE_INTERNAL_POLLING_THREAD.rawValue)
        if socketAddress.isIPv6 { flags |= UInt32(MHD_USE_IPv6.rawValue) }
        let started = socketAddress.withPointer { pointer in
            thing_agent_start_daemon(library.startDaemon, flags, UInt16(port), HTTPServer.handle, context,
                                     pointer.assumingMemoryBound(to: sockaddr.self), Self.connectionLimit,
                                     Self.connectionsPerClient, Self.connectionTimeout, ConnectionClock.notify,
                                     Unmanaged.passUnretained(clock).toOpaque())
        }
        guard let started else {
            throw HTTPServerError(message: "cannot listen on \(address): \(String(cString: strerror(errno)))")
        }
        daemon.pointer = started
        clock.start()
    }

    /// MHD_RESPMEM_MUST_COPY (the third mode; Swift imports the closed enum without its C case names here).
    private static let copyMemory = MHD_ResponseMemoryMode(rawValue: 2)!

    /// Stops listening and waits for the server thread; idempotent.
    public func stop() {
        guard let pointer = daemon.take() else { return }
        clock.stop()
        library.stopDaemon(pointer)
    }

    deinit { stop() }

    private func response(method: String, path: String) -> Response {
        guard let handler = routes[path] else {
            return Response(status: 404, contentType: "text/plain; charset=utf-8",
                            body: Array("not found; try \(routes.keys.sorted().joined(separator: " "))\n".utf8))
        }
        guard method == "GET" || method == "HEAD" else {
            return Response(status: 405, contentType: "text/plain; charset=utf-8", body: Array("GET only\n".utf8))
        }
        return handler()
    }

    /// libmicrohttpd's access handler: called on its thread with the server as `cls`. Answers on the first call
    /// for the request (a GET has no body to wait for).
    private static let handle: MHD_AccessHandlerCallback = {
        cls, connection, url, method, _, _, _, _ in
        guard let cls, let connection else { return .NO }
        let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
        let library = server.library
        let path = url.map { String(cString: $0) } ?? "/"
        let verb = method.map { String(cString: $0) } ?? "GET"
        let route = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let answer = server.response(method: verb, path: route)
        let response = answer.body.withUnsafeBytes { bytes in
            library.createResponse(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                            HTTPServer.copyMemory)
        }
        guard let response else { return .NO }
        defer { library.destroyResponse(response) }
        _ = library.addHeader(response, "Content-Type", answer.contentType)
        _ = library.addHeader(response, "Cache-Control", "no-store")
        return library.queueResponse(connection, UInt32(answer.status), response)
    }
}

public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// libmicrohttpd is not installed (or not usable): a restart cannot fix it, installing the package does.
    public let libraryMissing: Bool
    public var description: String { message }

    public init(message: String, libraryMissing: Bool = false) {
        self.message = message
        self.libraryMissing = libraryMissing
    }
}

/// The running daemon's pointer; set once at start, taken once at stop (kept as its address, which is Sendable).
private final class DaemonHandle: Sendable {
    private let address = Atomic<Int>(0)

    var pointer: OpaquePointer? {
        get { OpaquePointer(bitPattern: address.load(ordering: .acquiring)) }
        set { address.store(newValue.map { Int(bitPattern: $0) } ?? 0, ordering: .releasing) }
    }

    func take() -> OpaquePointer? {
        OpaquePointer(bitPattern: address.exchange(0, ordering: .acquiringAndReleasing))
    }
}

/// A resolved IPv4 or IPv6 socket address for libmicrohttpd's MHD_OPTION_SOCK_ADDR.
private struct SocketAddress {
    private var storage = sockaddr_storage()
    let isIPv6: Bool

    init?(host: String, port: Int) {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &results) == 0, let first = results else { return nil }
        defer { freeaddrinfo(results) }
        isIPv6 = first.pointee.ai_family == AF_INET6
        withUnsafeMutableBytes(of: &storage) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr,
                                                           count: Int(first.pointee.ai_addrlen)))
        }
    }

    mutating func withPointer<R>(_ body: (UnsafeMutableRawPointer) -> R) -> R {
        withUnsafeMutableBytes(of: &storage) { body($0.baseAddress!) }
    }
}
