import Glibc

/// A system call's failure: its errno and the system's words for it.
package struct SystemError: Error, CustomStringConvertible {
    package let code: Int32

    package init(code: Int32) { self.code = code }

    package var description: String { String(cString: strerror(code)) }
}

/// A file's bytes, read to its end (a /proc file, whose size reads as 0, included).
package func readWholeFile(_ path: String) throws(SystemError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw SystemError(code: errno) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count >= 0 else { throw SystemError(code: errno) }
        guard count > 0 else { return bytes }
        bytes.append(contentsOf: chunk[..<count])
    }
}

/// Writes all of `text` to `descriptor` with the system call itself; false when the descriptor takes no more (a
/// reader gone, a full disk). Cheaper on a short command than FileHandle and Data.
@discardableResult
package func writeAll(_ text: String, to descriptor: Int32) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
