extension JSONValue {
    /// Compact JSON text. Object keys in stored order, or sorted by their UTF-8 bytes when `sortedKeys`.
    /// Doubles print shortest round-trip; NaN and infinities (not representable in JSON) print as `null`.
    /// Strings escape `"`, `\` and control characters (as `\u00XX`); everything else, `/` and non-ASCII included, is kept.
    public func serialized(sortedKeys: Bool = false) -> String {
        String(decoding: serializedBytes(sortedKeys: sortedKeys), as: UTF8.self)
    }

    /// Compact JSON as UTF-8 bytes (see `serialized(sortedKeys:)`).
    public func serializedBytes(sortedKeys: Bool = false) -> [UInt8] {
        var writer = JSONWriter(sortedKeys: sortedKeys, indent: nil)
        writer.write(self, level: 0)
        return writer.out
    }

    /// Indented JSON text: one member or element per line, `"key": value`, empty containers as `{}` / `[]`.
    public func prettyPrinted(indent: Int = 2, sortedKeys: Bool = false) -> String {
        var writer = JSONWriter(sortedKeys: sortedKeys, indent: max(0, indent))
        writer.write(self, level: 0)
        return String(decoding: writer.out, as: UTF8.self)
    }
}

extension JSONObject: CustomStringConvertible {
    /// The compact JSON text of the object.
    public var description: String { JSONValue.object(self).serialized() }
}

internal struct JSONWriter {
    var out: [UInt8] = []
    let sortedKeys: Bool
    /// nil: compact output.
    let indent: Int?

    init(sortedKeys: Bool, indent: Int?) {
        self.sortedKeys = sortedKeys
        self.indent = indent
        out.reserveCapacity(128)
    }

    mutating func write(_ value: JSONValue, level: Int) {
        switch value {
        case .null:
            appendASCII("null")
        case .bool(let b):
            appendASCII(b ? "true" : "false")
        case .integer(let n):
            writeInteger(n)
        case .double(let d):
            if d.isFinite {
                out.append(contentsOf: d.description.utf8)
            } else {
                appendASCII("null")
            }
        case .string(let s):
            writeString(s)
        case .array(let elements):
            guard !elements.isEmpty else {
                appendASCII("[]")
                return
            }
            out.append(.openBracket)
            for (k, element) in elements.enumerated() {
                if k > 0 { out.append(.comma) }
                newline(level: level + 1)
                write(element, level: level + 1)
            }
            newline(level: level)
            out.append(.closeBracket)
        case .object(let object):
            guard !object.isEmpty else {
                appendASCII("{}")
                return
            }
            out.append(.openBrace)
            var first = true
            let pairs = sortedKeys ? object.pairs.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) } : object.pairs
            for member in pairs {
                let key = member.key
                let element = member.value
                if !first { out.append(.comma) }
                first = false
                newline(level: level + 1)
                writeString(key)
                out.append(.colon)
                if indent != nil { out.append(.space) }
                write(element, level: level + 1)
            }
            newline(level: level)
            out.append(.closeBrace)
        }
    }

    @inline(__always)
    private mutating func newline(level: Int) {
        guard let indent else { return }
        out.append(.newline)
        out.append(contentsOf: repeatElement(.space, count: indent * level))
    }

    @inline(__always)
    private mutating func appendASCII(_ text: StaticString) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private mutating func writeInteger(_ n: Int64) {
        var magnitude = n.magnitude
        // 20 digits hold UInt64.max; fill from the end.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var k = 20
            repeat {
                k -= 1
                buffer[k] = UInt8(truncatingIfNeeded: magnitude % 10) &+ .zero
                magnitude /= 10
            } while magnitude != 0
            if n < 0 { out.append(.minus) }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[k...]))
        }
    }

    mutating func writeString(_ s: String) {
        out.append(.quote)
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { writeEscaped($0) }
        if done == nil {
            let bytes = Array(s.utf8)
            bytes.withUnsafeBufferPointer { writeEscaped($0) }
        }
        out.append(.quote)
    }

    private mutating func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>) {
        var runStart = 0
        for k in 0 ..< bytes.count {
            let b = bytes[k]
            guard b < 0x20 || b == .quote || b == .backslash else { continue }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart ..< k]))
            runStart = k + 1
            out.append(.backslash)
            if b >= 0x20 {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "u"))
                out.append(.zero)
                out.append(.zero)
                out.append(Self.hexDigits[Int(b >> 4)])
                out.append(Self.hexDigits[Int(b & 0xF)])
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
