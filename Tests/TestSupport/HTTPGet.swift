import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plain HTTP/1.0 request to 127.0.0.1:port, read to the end: what `curl` would show, without needing curl.
public func httpRequest(port: Int, path: String, method: String = "GET") throws -> (status: Int, body: String) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket failed") }
    defer { close(fd) }
    var limit = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
    guard connected else { throw TestSupportError("cannot connect to 127.0.0.1:\(port)") }
    let request = Array("\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    guard send(fd, request, request.count, 0) == request.count else { throw TestSupportError("send failed") }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n < 0 { throw TestSupportError("recv failed: \(String(cString: strerror(errno)))") }
        if n == 0 { break }
        response += buffer[0..<n]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let headerEnd = text.range(of: "\r\n\r\n"),
          let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap({ Int($0) })
    else { throw TestSupportError("not an HTTP response: \(text.prefix(200))") }
    return (status, String(text[headerEnd.upperBound...]))
}
