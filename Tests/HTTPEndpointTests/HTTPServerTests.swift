import Dispatch
import Foundation
import HTTPEndpoint
import Synchronization
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The metrics and health endpoint's server on its own: libmicrohttpd on a free loopback port, asked over real
/// sockets as a scraper or `curl` would.
@Suite("HTTP endpoint", .timeLimit(.minutes(1)))
struct HTTPServerTests {
    static let text = "text/plain; charset=utf-8"

    /// Runs `body` with a server for `routes` on a free 127.0.0.1 port (and the port), stopping it afterwards.
    func withServer<T>(_ routes: [String: HTTPServer.Handler], _ body: (HTTPServer, Int) throws -> T) throws -> T {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let server = try HTTPServer(host: "127.0.0.1", port: port, address: "127.0.0.1:\(port)", routes: routes)
        defer { server.stop() }
        return try body(server, port)
    }

    /// A handler answering `body`.
    static func answer(_ body: String, status: Int = 200, type: String = text) -> HTTPServer.Handler {
        { HTTPServer.Response(status: status, contentType: type, body: Array(body.utf8)) }
    }

    @Test func aPathIsAnsweredWithItsHandlersStatusContentTypeAndBody() throws {
        let routes = [
            "/metrics": Self.answer("up 1\n", type: "text/plain; version=0.0.4; charset=utf-8"),
            "/health": Self.answer(#"{"healthy":false}"# + "\n", status: 503, type: "application/json"),
        ]
        try withServer(routes) { _, port in
            let metrics = try httpResponse(port: port, path: "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
            #expect(metrics.header("Content-Length") == "5")
            #expect(metrics.header("Cache-Control") == "no-store")
            #expect(metrics.text == "up 1\n")

            // The handler's status is the answer's, whatever it is.
            let health = try httpResponse(port: port, path: "/health")
            #expect(health.status == 503)
            #expect(health.header("Content-Type") == "application/json")
            #expect(health.text == #"{"healthy":false}"# + "\n")
        }
    }

    @Test func anUnknownPathIs404NamingThePathsThereAre() throws {
        try withServer(["/metrics": Self.answer("m"), "/health": Self.answer("h")]) { _, port in
            for path in ["/nothing", "/", "/metrics/", "/METRICS", "/metrics/extra", "/health.json"] {
                let response = try httpResponse(port: port, path: path)
                #expect(response.status == 404, "\(path)")
                #expect(response.header("Content-Type") == Self.text, "\(path)")
                #expect(response.text == "not found; try /health /metrics\n", "\(path)")
            }
        }
    }

    @Test func theQueryStringDoesNotChangeTheRoute() throws {
        try withServer(["/metrics": Self.answer("m")]) { _, port in
            let response = try httpResponse(port: port, path: "/metrics?name[]=up&x=1")
            #expect(response.status == 200)
            #expect(response.text == "m")
            #expect(try httpResponse(port: port, path: "/other?/metrics").status == 404)
        }
    }

    @Test func onlyGETAndHEADAreServed() throws {
        let calls = Counter()
        let routes: [String: HTTPServer.Handler] = ["/metrics": {
            calls.next()
            return HTTPServer.Response(status: 200, contentType: "text/plain", body: Array("0123456789".utf8))
        }]
        try withServer(routes) { _, port in
            for method in ["POST", "PUT", "DELETE"] {
                let refused = try httpResponse(port: port, path: "/metrics", method: method)
                #expect(refused.status == 405, "\(method)")
                #expect(refused.text == "GET only\n", "\(method)")
                #expect(refused.header("Content-Type") == Self.text)
            }
            #expect(calls.value == 0, "a refused method does not run the handler")
            // The path is looked at first: an unknown one is 404 whatever the method.
            #expect(try httpResponse(port: port, path: "/nothing", method: "POST").status == 404)

            let head = try httpResponse(port: port, path: "/metrics", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.body.isEmpty, "HEAD: the headers only")
            #expect(head.header("Content-Type") == "text/plain")
            #expect(head.header("Content-Length") == "10", "the length of the body a GET gets")
            #expect(calls.value == 1)
        }
    }

    /// A scrape sees the value of the moment: the handler runs again for every request.
    @Test func everyRequestRunsTheHandlerAgain() throws {
        let count = Counter()
        let routes: [String: HTTPServer.Handler] = ["/count": {
            let n = count.next()
            return HTTPServer.Response(status: 200, contentType: "text/plain", body: Array("\(n)".utf8))
        }]
        try withServer(routes) { _, port in
            let bodies = try (1...3).map { _ in try httpResponse(port: port, path: "/count").text }
            #expect(bodies == ["1", "2", "3"])
        }
    }

    @Test func aBodyArrivesByteForByteWhateverItsSizeAndBytes() throws {
        let binary = (0..<4).flatMap { _ in (0...255).map { UInt8($0) } }
        let large = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
        let routes: [String: HTTPServer.Handler] = [
            "/binary": { HTTPServer.Response(status: 200, contentType: "application/octet-stream", body: binary) },
            "/large": { HTTPServer.Response(status: 200, contentType: "application/octet-stream", body: large) },
            "/empty": { HTTPServer.Response(status: 204, contentType: "text/plain", body: []) },
        ]
        try withServer(routes) { _, port in
            let got = try httpResponse(port: port, path: "/binary")
            #expect(got.body == binary)
            #expect(got.header("Content-Type") == "application/octet-stream")
            let big = try httpResponse(port: port, path: "/large")
            #expect(big.body.count == large.count)
            #expect(big.body == large)
            let empty = try httpResponse(port: port, path: "/empty")
            #expect(empty.status == 204)
            #expect(empty.body.isEmpty)
        }
    }

    /// One internal polling thread serves every connection: a client that connected and sent nothing holds up
    /// nobody, and clients asking at once are all answered.
    @Test func anIdleClientHoldsUpNobodyAndClientsAtOnceAreAllAnswered() throws {
        try withServer(["/metrics": Self.answer("m")]) { _, port in
            let idle = try connectTCP(port: port)
            defer { close(idle) }
            let partial = try connectTCP(port: port)
            defer { close(partial) }
            let half = Array("GET /metr".utf8)
            #expect(send(partial, half, half.count, 0) == half.count)
            #expect(try httpResponse(port: port, path: "/metrics").text == "m")

            let answers = Mutex<[Int]>([])
            DispatchQueue.concurrentPerform(iterations: 16) { _ in
                let status = (try? httpResponse(port: port, path: "/metrics").status) ?? 0
                answers.withLock { $0.append(status) }
            }
            #expect(answers.withLock { $0 } == Array(repeating: 200, count: 16))
        }
    }

    /// Slow clients (one header line now and then, which restarts libmicrohttpd's idle timeout every time) from one
    /// address take at most `connectionsPerClient` connections, so a scrape from another is answered; and each
    /// connection ends after the server's time limit however busy the client keeps it.
    @Test func slowClientsHangOnWhileAScrapeIsAnsweredAndEachIsCutAtTheTimeLimit() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let server = try HTTPServer(host: "127.0.0.1", port: port, address: "127.0.0.1:\(port)",
                                    routes: ["/metrics": Self.answer("m")], timeLimit: .seconds(2))
        defer { server.stop() }
        var slow: [Int32] = []
        defer { slow.forEach { close($0) } }
        for _ in 0..<Int(HTTPServer.connectionLimit) {
            let fd = try connectTCP(port: port, source: "127.0.0.2")
            slow.append(fd)
            let line = Array("GET /metrics HTTP/1.1\r\n".utf8)
            _ = send(fd, line, line.count, Int32(MSG_NOSIGNAL))
        }
        #expect(try httpResponse(port: port, path: "/metrics").text == "m", "a scrape from another address")

        // One slow client that keeps sending: cut by the time limit, not by the idle timeout (10 s).
        let started = ContinuousClock.now
        let trickle = try connectTCP(port: port)
        defer { close(trickle) }
        let request = Array("GET /metrics HTTP/1.1\r\n".utf8)
        #expect(send(trickle, request, request.count, Int32(MSG_NOSIGNAL)) == request.count)
        var cut = false
        while !cut, ContinuousClock.now - started < .seconds(8) {
            let header = Array("X-Slow: 1\r\n".utf8)
            if send(trickle, header, header.count, Int32(MSG_NOSIGNAL)) < 0 { cut = true }
            var descriptor = pollfd(fd: trickle, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 300) > 0 {
                var byte: UInt8 = 0
                cut = recv(trickle, &byte, 1, Int32(MSG_DONTWAIT)) <= 0
            }
        }
        #expect(cut, "a connection that keeps sending is still cut at the time limit")
        #expect(ContinuousClock.now - started >= .seconds(2), "not before it")
    }

    @Test func stopClosesThePortAndFreesItForTheNextServer() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let first = try HTTPServer(host: "127.0.0.1", port: port, address: "127.0.0.1:\(port)",
                                   routes: ["/who": Self.answer("first")])
        #expect(try httpResponse(port: port, path: "/who").text == "first")
        first.stop()
        #expect(!loopbackPortAccepts(port), "nothing listens once stopped")
        #expect(throws: (any Error).self) { try httpResponse(port: port, path: "/who") }
        first.stop()  // idempotent

        let second = try HTTPServer(host: "127.0.0.1", port: port, address: "127.0.0.1:\(port)",
                                    routes: ["/who": Self.answer("second")])
        defer { second.stop() }
        #expect(try httpResponse(port: port, path: "/who").text == "second")
    }

    @Test func aReleasedServerStopsListening() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        func serveOnce() throws {
            let server = try HTTPServer(host: "127.0.0.1", port: port, address: "127.0.0.1:\(port)",
                                        routes: ["/who": Self.answer("once")])
            #expect(try httpResponse(port: port, path: "/who").text == "once")
            withExtendedLifetime(server) {}
        }
        try serveOnce()
        #expect(!loopbackPortAccepts(port), "the server's deinit stopped it")
    }

    @Test func aPortInUseIsAnErrorNamingTheAddressAndTheFirstServerKeepsServing() throws {
        try withServer(["/who": Self.answer("first")]) { _, port throws in
            let address = "127.0.0.1:\(port)"
            #expect {
                _ = try HTTPServer(host: "127.0.0.1", port: port, address: address, routes: ["/who": Self.answer("x")])
            } throws: { error in
                let failure = error as? HTTPServerError
                return failure?.libraryMissing == false
                    && failure?.message == "cannot listen on \(address): Address already in use"
            }
            #expect(try httpResponse(port: port, path: "/who").text == "first")
        }
    }

    /// Held by something else than a server of ours: a plain listening socket.
    @Test func aPortAnotherProgramListensOnIsAnError() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let listener = try Self.listen(port: port)
        defer { close(listener) }
        #expect {
            _ = try HTTPServer(host: "127.0.0.1", port: port, address: "localhost:\(port)", routes: [:])
        } throws: { error in
            (error as? HTTPServerError)?.message == "cannot listen on localhost:\(port): Address already in use"
        }
    }

    /// An address of no interface of this machine (TEST-NET-1) cannot be listened on; the error says so.
    @Test func anAddressOfAnotherMachineIsAnError() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let address = "192.0.2.1:\(port)"
        #expect {
            _ = try HTTPServer(host: "192.0.2.1", port: port, address: address, routes: [:])
        } throws: { error in
            (error as? HTTPServerError)?.message == "cannot listen on \(address): Cannot assign requested address"
        }
    }

    /// `metricsAddress` takes `[::1]:PORT`: a machine without an IPv6 loopback fails here rather than skipping it.
    @Test func theIPv6LoopbackIsServedToo() throws {
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        let server = try HTTPServer(host: "::1", port: port, address: "[::1]:\(port)", routes: ["/v": Self.answer("6")])
        defer { server.stop() }
        let response = try httpResponse(host: "::1", port: port, path: "/v")
        #expect(response.status == 200)
        #expect(response.text == "6")
        #expect(!loopbackPortAccepts(port), "bound to ::1 only, not to 127.0.0.1")
    }

    /// A socket listening on 127.0.0.1:port.
    static func listen(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard bound, Glibc.listen(fd, 4) == 0 else {
            close(fd)
            throw TestSupportError("cannot listen on 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }
}

/// Counts calls of a handler (which runs on libmicrohttpd's thread).
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .relaxed) }
    @discardableResult func next() -> Int { count.add(1, ordering: .relaxed).newValue }
}
