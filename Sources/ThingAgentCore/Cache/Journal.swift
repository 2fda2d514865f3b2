#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of the raw messages the receive path accepted, written before the broker gets its PUBACK.
///
/// The file is memory-mapped (`MAP_SHARED`): appending a record is a copy into the page cache, no system call, and
/// the page cache outlives a killed process. SQLite gets the same changes later, in batched transactions
/// (`CacheFlusher`). At start, the records SQLite has not seen are replayed through the same decode-and-apply path,
/// which is idempotent (stale values lose), so replaying a record twice changes nothing.
///
/// Every record carries the journal's generation and a CRC. Emptying the journal only bumps the generation in the
/// header; replay stops at the first record that is torn, corrupt or of an older generation, so old bytes past the
/// end are never mistaken for new records. Not thread-safe: `CacheWriter` serializes access.
final package class Journal {
    package struct Record: Equatable {
        package var topic: String
        package var payload: [UInt8]
        package var arrival: Millis
    }

    static package let magic: [UInt8] = Array("TAJ2".utf8)
    static package let headerSize = 16                  // magic, UInt32 reserved, UInt64 generation
    static package let recordHeaderSize = 26            // UInt32 length, UInt32 crc, UInt64 generation, Int64 arrival, UInt16 topic length
    static package let initialCapacity = 16 << 20

    package let path: String
    private let fd: Int32
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    /// Bumped each time the journal is emptied, so a stale file is never replayed against a newer cache.
    private(set) var generation: UInt64
    /// Where the next record goes (bytes from the start of the file).
    private(set) var end: Int64 { didSet { usedBytes.store(Int(end)) } }
    /// `end`, readable without the writer's lock (the `thing_agent_journal_bytes` metric).
    package let usedBytes = AtomicCounter()

    /// The size the file is reserved at, and shrinks back to when emptied.
    package let initialCapacity: Int
    /// Device and inode of the open file, to tell when the path no longer leads to it (deleted, replaced).
    private let identity: (device: UInt64, inode: UInt64)

    package init(path: String, initialCapacity: Int = Journal.initialCapacity) throws(JournalError) {
        self.path = path
        self.initialCapacity = initialCapacity
        // A file this call creates and then cannot reserve (a full disk) is removed again: left behind empty, it
        // would be found as a replaced journal by the next check, moved aside, and made again, once a second.
        let creating = access(path, F_OK) != 0
        fd = PrivateFiles.open(path, flags: O_RDWR)
        guard fd >= 0 else { throw JournalError(path: path, operation: "open", code: errno) }
        var info = stat()
        _ = fstat(fd, &info)
        identity = (UInt64(info.st_dev), UInt64(info.st_ino))
        let size = Int(lseek(fd, 0, SEEK_END))
        // A file that holds something else is refused, not taken over: it is left as it is for a person to look at.
        var header = [UInt8](repeating: 0, count: Self.headerSize)
        let read = size > 0 ? pread(fd, &header, Self.headerSize, 0) : 0
        if read > 0, Array(header[0..<min(4, read)]) != Array(Self.magic[0..<min(4, read)]), header.contains(where: { $0 != 0 }) {
            close(fd)
            throw JournalError(path: path, operation: "use", code: EINVAL,
                               detail: "it is not a thing-agent journal; move it away to start a new one")
        }
        capacity = max(size, initialCapacity)
        do throws(JournalError) {
            // Reserved, not only sized: a page written through the mapping that the disk has no room for would
            // end the process with SIGBUS. An existing file is reserved too (an older version sized it sparse).
            try Self.reserve(fd, capacity, path: path, operation: "reserve space for")
            base = try Self.map(fd, capacity, path: path)
        } catch {
            close(fd)
            if creating { unlink(path) }
            throw error
        }
        let existing = size >= Self.headerSize && Array(UnsafeRawBufferPointer(start: base, count: 4)) == Self.magic
        generation = existing ? base.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndianValue : 1
        end = Int64(Self.headerSize)
        if !existing { writeHeader() }
        // The append position is after the last intact record of this generation.
        if let last = scan(from: end).last { end = last.end }
        usedBytes.store(Int(end))
    }

    deinit {
        munmap(base, capacity)
        close(fd)
    }

    /// Appends one record. The length is stored last, so a process killed mid-copy leaves a record that replay
    /// recognizes as torn.
    package func append(topic: String, payload: [UInt8], arrival: Millis) throws(JournalError) {
        // A page past the end of the file is SIGBUS when touched: a file truncated by someone else is refused
        // until `reset` made it whole again (one fstat per record, a fraction of a microsecond).
        try checkSize(operation: "append to")
        let length = Self.recordHeaderSize + topic.utf8.count + payload.count
        if Int(end) + length > capacity { try grow(toFit: Int(end) + length) }
        let record = base + Int(end)
        record.storeBytes(of: UInt32(0), toByteOffset: 0, as: UInt32.self)
        record.storeBytes(of: generation.littleEndian, toByteOffset: 8, as: UInt64.self)
        record.storeBytes(of: UInt64(bitPattern: arrival).littleEndian, toByteOffset: 16, as: UInt64.self)
        var topic = topic
        let topicLength = topic.withUTF8 { bytes in
            if let source = bytes.baseAddress {
                (record + Self.recordHeaderSize).copyMemory(from: source, byteCount: bytes.count)
            }
            return bytes.count
        }
        record.storeBytes(of: UInt16(topicLength).littleEndian, toByteOffset: 24, as: UInt16.self)
        payload.withUnsafeBytes { bytes in
            if let source = bytes.baseAddress {
                (record + Self.recordHeaderSize + topicLength).copyMemory(from: source, byteCount: bytes.count)
            }
        }
        let crc = CRC32.checksum(UnsafeRawBufferPointer(start: record + 8, count: length - 8))
        record.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
        record.storeBytes(of: UInt32(length).littleEndian, toByteOffset: 0, as: UInt32.self)
        end += Int64(length)
    }

    /// The records from `offset` on, stopping at the first torn, corrupt or older one.
    /// None while the file is shorter than the mapping (truncated by someone else: reading it would be SIGBUS).
    package func records(from offset: Int64) -> [(record: Record, end: Int64)] {
        guard (try? checkSize(operation: "read")) != nil else { return [] }
        return scan(from: max(offset, Int64(Self.headerSize)))
    }

    /// Empties the journal and starts the next generation (every record is in SQLite by now). A file truncated
    /// by another process is reserved to its whole size again first.
    package func reset(generation next: UInt64) throws(JournalError) {
        try Self.reserve(fd, capacity, path: path, operation: "reserve space for")
        generation = next
        writeHeader()
        end = Int64(Self.headerSize)
        if capacity > Self.initialCapacity {
            // Map the smaller file before letting go of the old mapping: a failure keeps a usable journal.
            guard ftruncate(fd, off_t(initialCapacity)) == 0 else { return }
            guard let smaller = try? Self.map(fd, initialCapacity, path: path) else {
                _ = ftruncate(fd, off_t(capacity))  // the old mapping must stay backed by the file
                return
            }
            munmap(base, capacity)
            base = smaller
            capacity = initialCapacity
        }
    }

    /// The most one record takes: a payload of 256 KiB (the receive path's limit) and the longest topic.
    static package let maxRecordSize = recordHeaderSize + Int(UInt16.max) + (256 << 10)

    /// Grows the file now when the largest record would not fit (the file check, after an append found no room).
    package func makeRoom() throws(JournalError) {
        try checkSize(operation: "grow")
        if Int(end) + Self.maxRecordSize > capacity { try grow(toFit: Int(end) + Self.maxRecordSize) }
    }

    /// What is wrong with the file under a journal that works in memory.
    package enum Problem: CustomStringConvertible {
        /// Someone made it shorter than the mapping (touching the pages past its end would be SIGBUS).
        case truncated(size: Int, expected: Int)
        /// The path leads to no file, or to another one.
        case deleted(code: Int32)
        case replaced

        package var description: String {
            switch self {
            case .truncated(let size, let expected):
                "the file was truncated by another process (\(size) bytes, \(expected) expected)"
            case .deleted(let code): "the file was deleted (\(String(cString: strerror(code))))"
            case .replaced: "the file was replaced by another one"
            }
        }
    }

    /// Why the file no longer is the journal this object writes; nil when all is well.
    package func problem() -> Problem? {
        var open = stat(), named = stat()
        if fstat(fd, &open) == 0, Int(open.st_size) < capacity {
            return .truncated(size: Int(open.st_size), expected: capacity)
        }
        guard stat(path, &named) == 0 else { return .deleted(code: errno) }
        if UInt64(named.st_dev) != identity.device || UInt64(named.st_ino) != identity.inode { return .replaced }
        return nil
    }

    private func checkSize(operation: String) throws(JournalError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw JournalError(path: path, operation: operation, code: errno) }
        if Int(info.st_size) < capacity {
            throw JournalError(path: path, operation: operation, code: EIO,
                               detail: "\(Problem.truncated(size: Int(info.st_size), expected: capacity))")
        }
    }

    /// Allocates the file's blocks up to `size` (growing it when shorter): a full disk fails here, with ENOSPC.
    private static func reserve(_ fd: Int32, _ size: Int, path: String, operation: String) throws(JournalError) {
        let rc = posix_fallocate(fd, 0, off_t(size))
        if rc != 0 { throw JournalError(path: path, operation: operation, code: rc) }
    }

    private func scan(from start: Int64) -> [(record: Record, end: Int64)] {
        var result: [(Record, Int64)] = []
        var position = Int(start)
        while position + Self.recordHeaderSize <= capacity {
            let record = base + position
            let length = Int(record.loadUnaligned(as: UInt32.self).littleEndianValue)
            guard length >= Self.recordHeaderSize, position + length <= capacity,
                  record.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndianValue == generation,
                  CRC32.checksum(UnsafeRawBufferPointer(start: record + 8, count: length - 8))
                    == record.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndianValue
            else { break }
            let arrival = Int64(bitPattern: record.loadUnaligned(fromByteOffset: 16, as: UInt64.self).littleEndianValue)
            let topicLength = Int(record.loadUnaligned(fromByteOffset: 24, as: UInt16.self).littleEndianValue)
            guard Self.recordHeaderSize + topicLength <= length else { break }
            let topic = String(decoding: UnsafeRawBufferPointer(start: record + Self.recordHeaderSize, count: topicLength),
                               as: UTF8.self)
            let payload = [UInt8](UnsafeRawBufferPointer(start: record + Self.recordHeaderSize + topicLength,
                                                         count: length - Self.recordHeaderSize - topicLength))
            position += length
            result.append((Record(topic: topic, payload: payload, arrival: arrival), Int64(position)))
        }
        return result
    }

    private func writeHeader() {
        base.copyMemory(from: Self.magic, byteCount: 4)
        base.storeBytes(of: UInt32(0), toByteOffset: 4, as: UInt32.self)
        base.storeBytes(of: generation.littleEndian, toByteOffset: 8, as: UInt64.self)
    }

    private func grow(toFit needed: Int) throws(JournalError) {
        var next = capacity
        while next < needed { next *= 2 }
        try Self.reserve(fd, next, path: path, operation: "grow")
        let grown = try Self.map(fd, next, path: path)
        munmap(base, capacity)
        base = grown
        capacity = next
    }

    private static func map(_ fd: Int32, _ size: Int, path: String) throws(JournalError) -> UnsafeMutableRawPointer {
        let pointer = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let pointer, pointer != UnsafeMutableRawPointer(bitPattern: -1) else {
            throw JournalError(path: path, operation: "map", code: errno)
        }
        return pointer
    }
}

private extension FixedWidthInteger {
    var littleEndianValue: Self { Self(littleEndian: self) }
}

public struct JournalError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let operation: String
    public let code: Int32
    /// Says what is wrong when `code`'s text would not.
    public var detail: String? = nil

    public var description: String {
        "cannot \(operation) the journal \(path): \(detail ?? String(cString: strerror(code)))"
    }
}

/// CRC-32 (IEEE), to tell a whole journal record from a torn one. Slicing by eight: eight tables, eight bytes per
/// step, the same checksum as the byte-at-a-time loop at a quarter of its cost (the profile of the receive path
/// showed that loop as most of the journal's time).
package enum CRC32 {
    /// `tables[k][b]`: the CRC of byte `b` followed by `k` zero bytes, so that eight bytes fold in one step.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            tables[index] = (0..<8).reduce(UInt32(index)) { crc, _ in crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        for slice in 1..<8 {
            for index in 0..<256 {
                let previous = tables[(slice - 1) * 256 + index]
                tables[slice * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static package func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        tables.withUnsafeBufferPointer { t in
            var crc = ~UInt32(0)
            var offset = 0
            let count = bytes.count
            while offset + 8 <= count {
                let low = bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndianValue ^ crc
                let high = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self).littleEndianValue
                crc = t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                offset += 8
            }
            while offset < count {
                crc = t[Int((crc ^ UInt32(bytes[offset])) & 0xFF)] ^ (crc >> 8)
                offset += 1
            }
            return ~crc
        }
    }
}
