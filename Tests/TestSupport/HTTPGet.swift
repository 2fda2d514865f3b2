import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plain HTTP/1.0 request to 127.0.0.1:port, read to the end: what `curl` would show, without needing curl.
public func httpRequest(port: Int, path: String, method: String = "GET") throws -> (status: Int, body: String) {
    let response = try httpResponse(port: port, path: path, method: method)
    return (response.status, response.text)
}

/// An HTTP response as it came over the socket.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// The header fields in order, names as sent.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The value of the header field `name` (case-insensitive), the first when repeated.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A plain HTTP/1.0 request to `host` (a numeric IPv4 or IPv6 address) and `port`, read until the server closes.
public func httpResponse(host: String = "127.0.0.1", port: Int, path: String, method: String = "GET") throws
    -> HTTPResponse {
    let fd = try connectTCP(host: host, port: port)
    defer { close(fd) }
    let authority = host.contains(":") ? "[\(host)]" : host
    let request = Array("\(method) \(path) HTTP/1.0\r\nHost: \(authority)\r\n\r\n".utf8)
    guard send(fd, request, request.count, 0) == request.count else { throw TestSupportError("send failed") }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n < 0 { throw TestSupportError("recv failed: \(String(cString: strerror(errno)))") }
        if n == 0 { break }
        response += buffer[0..<n]
    }
    let separator = Array("\r\n\r\n".utf8)
    guard let headerEnd = (0...max(0, response.count - separator.count)).first(where: {
        response.count >= $0 + separator.count && Array(response[$0..<($0 + separator.count)]) == separator
    }) else { throw TestSupportError("not an HTTP response: \(String(decoding: response.prefix(200), as: UTF8.self))") }
    let lines = String(decoding: response[..<headerEnd], as: UTF8.self).components(separatedBy: "\r\n")
    guard let status = lines.first?.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap({ Int($0) }) else {
        throw TestSupportError("not an HTTP status line: \(lines.first ?? "")")
    }
    let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    return HTTPResponse(status: status, headers: headers, body: Array(response[(headerEnd + separator.count)...]))
}

/// A TCP connection to `host` (numeric IPv4 or IPv6) and `port`, with a 10 s receive timeout; the caller closes it.
/// `source`: the local IPv4 address to connect from (another loopback address such as 127.0.0.2 is another client
/// to the server).
public func connectTCP(host: String = "127.0.0.1", port: Int, source: String? = nil) throws -> Int32 {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
    var results: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &results) == 0, let address = results else {
        throw TestSupportError("not a numeric address: \(host)")
    }
    defer { freeaddrinfo(results) }
    let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket failed") }
    var limit = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    if let source {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, source, &local.sin_addr) == 1 else {
            close(fd)
            throw TestSupportError("not a numeric IPv4 address: \(source)")
        }
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw TestSupportError("cannot bind \(source): \(reason)")
        }
    }
    guard Glibc.connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw TestSupportError("cannot connect to \(host) port \(port): \(reason)")
    }
    return fd
}
