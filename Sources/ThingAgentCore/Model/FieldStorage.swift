import JSON

/// The values of `DeviceInfo.fields`, packed into one byte buffer: a tag per field, then its bytes. A million cached
/// devices each keep a couple of hundred bytes here instead of twenty enum slots and their separate strings.
/// Reading a field scans past the ones before it (a few dozen bytes); writing re-packs the buffer.
package struct FieldStorage: Sendable, Equatable {
    private enum Tag: UInt8 {
        case null = 0, string, integer, json
    }

    private var bytes: [UInt8]

    package init(_ values: [JSONValue]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(values.count * 4)
        for value in values { Self.encode(value, into: &bytes) }
        self.bytes = bytes
    }

    package init(count: Int) {
        bytes = Array(repeating: Tag.null.rawValue, count: count)
    }

    package func value(at index: Int) -> JSONValue {
        bytes.withUnsafeBufferPointer { buffer in
            var position = 0
            for _ in 0..<index { position = Self.skip(buffer, position) }
            return Self.decode(buffer, position)
        }
    }

    /// Every value, in field order.
    package var all: [JSONValue] {
        bytes.withUnsafeBufferPointer { buffer in
            var values: [JSONValue] = []
            var position = 0
            while position < buffer.count {
                values.append(Self.decode(buffer, position))
                position = Self.skip(buffer, position)
            }
            return values
        }
    }

    /// Packs fields one at a time, in field order, from raw bytes: the cache load copies SQLite's column text
    /// straight in, with no String or JSON value in between.
    package struct Builder {
        private var bytes: [UInt8] = []

        init(capacity: Int) {
            bytes.reserveCapacity(capacity)
        }

        mutating func appendNull() { bytes.append(Tag.null.rawValue) }

        mutating func appendInteger(_ number: Int64) {
            FieldStorage.encode(.integer(number), into: &bytes)
        }

        mutating func appendString(_ utf8: UnsafeBufferPointer<UInt8>) { appendRaw(.string, utf8) }

        /// JSON text as stored (arrays, objects); parsed only when the field is read.
        mutating func appendJSON(_ utf8: UnsafeBufferPointer<UInt8>) { appendRaw(.json, utf8) }

        private mutating func appendRaw(_ tag: Tag, _ utf8: UnsafeBufferPointer<UInt8>) {
            bytes.append(tag.rawValue)
            FieldStorage.putVarint(UInt64(utf8.count), into: &bytes)
            bytes.append(contentsOf: utf8)
        }

        /// The packed fields, in storage of their exact size; the builder is empty again and keeps its buffer
        /// for the next device.
        mutating func build() -> FieldStorage {
            defer { bytes.removeAll(keepingCapacity: true) }
            return FieldStorage(packed: [UInt8](unsafeUninitializedCapacity: bytes.count) { target, count in
                count = target.initialize(fromContentsOf: bytes)
            })
        }
    }

    private init(packed: [UInt8]) {
        bytes = packed
    }

    mutating package func set(_ changes: [(index: Int, value: JSONValue)]) {
        var values = all
        for (index, value) in changes { values[index] = value }
        self = FieldStorage(values)
    }

    private static func encode(_ value: JSONValue, into bytes: inout [UInt8]) {
        switch value {
        case .null:
            bytes.append(Tag.null.rawValue)
        case .string(let text):
            bytes.append(Tag.string.rawValue)
            putVarint(UInt64(text.utf8.count), into: &bytes)
            bytes.append(contentsOf: text.utf8)
        case .integer(let number):
            bytes.append(Tag.integer.rawValue)
            putVarint(UInt64(bitPattern: (number << 1) ^ (number >> 63)), into: &bytes)
        default:
            let text = value.serializedBytes()
            bytes.append(Tag.json.rawValue)
            putVarint(UInt64(text.count), into: &bytes)
            bytes.append(contentsOf: text)
        }
    }

    private static func decode(_ buffer: UnsafeBufferPointer<UInt8>, _ position: Int) -> JSONValue {
        guard position < buffer.count else { return .null }
        var cursor = position + 1
        switch Tag(rawValue: buffer[position]) {
        case .string?:
            let length = Int(varint(buffer, &cursor))
            return .string(String(decoding: UnsafeBufferPointer(rebasing: buffer[cursor..<(cursor + length)]), as: UTF8.self))
        case .integer?:
            let zigzag = varint(buffer, &cursor)
            return .integer(Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1))
        case .json?:
            let length = Int(varint(buffer, &cursor))
            let slice = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[cursor..<(cursor + length)]))
            return (try? JSONParser.parse(slice)) ?? .null
        case .null?, nil:
            return .null
        }
    }

    private static func skip(_ buffer: UnsafeBufferPointer<UInt8>, _ position: Int) -> Int {
        var cursor = position + 1
        switch Tag(rawValue: buffer[position]) {
        case .string?, .json?:
            let length = Int(varint(buffer, &cursor))
            return cursor + length
        case .integer?:
            _ = varint(buffer, &cursor)
            return cursor
        case .null?, nil:
            return cursor
        }
    }

    private static func putVarint(_ value: UInt64, into bytes: inout [UInt8]) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private static func varint(_ buffer: UnsafeBufferPointer<UInt8>, _ cursor: inout Int) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while cursor < buffer.count {
            let byte = buffer[cursor]
            cursor += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { break }
            shift += 7
        }
        return value
    }
}
