#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of the raw messages the receive path accepted, written before the broker gets its PUBACK.
///
/// One `write(2)` per message puts the record in the kernel's page cache, which survives a killed process; SQLite
/// gets the same changes later, in batched transactions (`CacheFlusher`). At start, the records SQLite has not seen
/// yet are replayed through the same decode-and-apply path, which is idempotent (stale values lose), so replaying a
/// record twice changes nothing. Not thread-safe: `CacheWriter` serializes access.
final class Journal {
    struct Record: Equatable {
        var topic: String
        var payload: [UInt8]
        var arrival: Millis
    }

    static let magic: [UInt8] = Array("TAJ1".utf8)
    static let headerSize = 12          // magic + UInt64 generation
    static let recordHeaderSize = 18    // UInt32 length + UInt32 crc + Int64 arrival + UInt16 topic length

    let path: String
    private let fd: Int32
    /// Bumped each time the journal is emptied, so a stale file is never replayed against a newer cache.
    private(set) var generation: UInt64
    /// Bytes in the file, header included.
    private(set) var end: Int64
    private var buffer: [UInt8] = []

    init(path: String) throws(JournalError) {
        self.path = path
        fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw JournalError(path: path, operation: "open", code: errno) }
        let size = lseek(fd, 0, SEEK_END)
        if size < Int64(Self.headerSize) {
            generation = 1
            end = 0
            do {
                try Self.truncate(fd, path: path)
                try writeHeader()
            } catch {
                close(fd)
                throw error
            }
            return
        }
        var header = [UInt8](repeating: 0, count: Self.headerSize)
        guard pread(fd, &header, Self.headerSize, 0) == Self.headerSize, Array(header[0..<4]) == Self.magic else {
            close(fd)
            throw JournalError(path: path, operation: "read the header of", code: EINVAL)
        }
        generation = header[4..<12].enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        end = Int64(size)
    }

    deinit {
        close(fd)
    }

    /// Appends one record with a single write, so a killed process leaves either all of it or none.
    func append(topic: String, payload: [UInt8], arrival: Millis) throws(JournalError) {
        let topicBytes = topic.utf8
        let length = Self.recordHeaderSize + topicBytes.count + payload.count
        buffer.removeAll(keepingCapacity: true)
        buffer.reserveCapacity(length)
        Self.put(UInt32(length), into: &buffer)
        Self.put(UInt32(0), into: &buffer)                   // crc, filled below
        Self.put(UInt64(bitPattern: arrival), into: &buffer)
        Self.put(UInt16(topicBytes.count), into: &buffer)
        buffer.append(contentsOf: topicBytes)
        buffer.append(contentsOf: payload)
        let crc = CRC32.checksum(buffer[8...])
        buffer.withUnsafeMutableBytes { $0.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self) }
        let written = buffer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == length else {
            // A short write (disk full) leaves a torn tail; cut it so the next record starts clean.
            if written > 0 { ftruncate(fd, off_t(end)) }
            throw JournalError(path: path, operation: "append to", code: written < 0 ? errno : ENOSPC)
        }
        end += Int64(length)
    }

    /// The records from `offset` on, stopping at the first torn or corrupt one (a crash mid-write, a power loss).
    func records(from offset: Int64) -> [(record: Record, end: Int64)] {
        let start = max(offset, Int64(Self.headerSize))
        guard end > start else { return [] }
        var bytes = [UInt8](repeating: 0, count: Int(end - start))
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(start)) }
        guard count > 0 else { return [] }
        var result: [(Record, Int64)] = []
        var position = 0
        while position + Self.recordHeaderSize <= count {
            let length = Int(Self.get(UInt32.self, bytes, position))
            guard length >= Self.recordHeaderSize, position + length <= count else { break }
            let crc = Self.get(UInt32.self, bytes, position + 4)
            guard CRC32.checksum(bytes[(position + 8)..<(position + length)]) == crc else { break }
            let arrival = Int64(bitPattern: Self.get(UInt64.self, bytes, position + 8))
            let topicLength = Int(Self.get(UInt16.self, bytes, position + 16))
            let topicStart = position + Self.recordHeaderSize
            guard topicStart + topicLength <= position + length else { break }
            let topic = String(decoding: bytes[topicStart..<(topicStart + topicLength)], as: UTF8.self)
            let payload = Array(bytes[(topicStart + topicLength)..<(position + length)])
            position += length
            result.append((Record(topic: topic, payload: payload, arrival: arrival), start + Int64(position)))
        }
        return result
    }

    /// Empties the journal and starts the next generation (every record is in SQLite by now).
    func reset(generation next: UInt64) throws(JournalError) {
        try Self.truncate(fd, path: path)
        generation = next
        end = 0
        try writeHeader()
    }

    private func writeHeader() throws(JournalError) {
        var header = Self.magic
        Self.put(generation, into: &header)
        let written = header.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == Self.headerSize else { throw JournalError(path: path, operation: "write the header of", code: errno) }
        end = Int64(Self.headerSize)
    }

    private static func truncate(_ fd: Int32, path: String) throws(JournalError) {
        guard ftruncate(fd, 0) == 0 else { throw JournalError(path: path, operation: "truncate", code: errno) }
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func get<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
        bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}

public struct JournalError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let operation: String
    public let code: Int32

    public var description: String {
        "cannot \(operation) the journal \(path): \(String(cString: strerror(code)))"
    }
}

/// CRC-32 (IEEE), to tell a whole journal record from a torn one.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        (0..<8).reduce(UInt32(index)) { crc, _ in crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
    }

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        table.withUnsafeBufferPointer { table in
            ~bytes.reduce(~UInt32(0)) { crc, byte in table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
    }
}
