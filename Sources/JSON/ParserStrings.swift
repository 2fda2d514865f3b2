extension Parser {
    /// Parses a string body; `i` is just after the opening quote and ends just after the closing quote.
    @inline(__always)
    mutating func parseString() throws(JSONError) -> String {
        let start = i
        var j = i
        while j < count {
            let b = base[j]
            // Printable ASCII other than `"` and `\` (0x20...0x7F): the common case.
            if b &- 0x20 < 0x60 {
                if b == .quote {
                    i = j + 1
                    return Self.makeString(base + start, count: j - start)
                }
                if b == .backslash {
                    i = j
                    return try parseEscapedString(from: start)
                }
                j += 1
            } else if b < 0x20 {
                throw JSONError(kind: .controlCharacterInString, offset: j, byte: b)
            } else {
                let n = UTF8Validation.sequenceLength(base, at: j, count: count)
                guard n > 0 else { throw JSONError(kind: .invalidUTF8, offset: j, byte: b) }
                j += n
            }
        }
        throw unexpectedEnd()
    }

    /// The slow path: `base[start..<i]` is plain validated text and `base[i]` is a backslash.
    private mutating func parseEscapedString(from start: Int) throws(JSONError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: base + start, count: i - start))
        while true {
            guard i < count else { throw unexpectedEnd() }
            let b = base[i]
            if b == .quote {
                i += 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if b == .backslash {
                try decodeEscape()
                continue
            }
            // A run of plain bytes up to the next quote, backslash, control character or end.
            let runStart = i
            var j = i
            while j < count {
                let c = base[j]
                if c &- 0x20 < 0x60 {
                    if c == .quote || c == .backslash { break }
                    j += 1
                } else if c < 0x20 {
                    throw JSONError(kind: .controlCharacterInString, offset: j, byte: c)
                } else {
                    let n = UTF8Validation.sequenceLength(base, at: j, count: count)
                    guard n > 0 else { throw JSONError(kind: .invalidUTF8, offset: j, byte: c) }
                    j += n
                }
            }
            scratch.append(contentsOf: UnsafeBufferPointer(start: base + runStart, count: j - runStart))
            i = j
        }
    }

    /// Decodes the escape at `base[i]` (a backslash) into `scratch`.
    private mutating func decodeEscape() throws(JSONError) {
        let escapeStart = i
        guard i + 1 < count else { throw unexpectedEnd() }
        let e = base[i + 1]
        let byte: UInt8
        switch e {
        case .quote, .backslash, .slash: byte = e
        case UInt8(ascii: "b"): byte = 0x08
        case UInt8(ascii: "f"): byte = 0x0C
        case UInt8(ascii: "n"): byte = 0x0A
        case UInt8(ascii: "r"): byte = 0x0D
        case UInt8(ascii: "t"): byte = 0x09
        case UInt8(ascii: "u"):
            let unit = try hex4(at: i + 2, escapeStart: escapeStart)
            i += 6
            var scalar = UInt32(unit)
            if unit >= 0xD800 && unit <= 0xDBFF {
                // A high surrogate must be followed by an escaped low surrogate.
                guard i < count else { throw unexpectedEnd() }
                guard base[i] == .backslash else { throw JSONError(kind: .invalidEscape, offset: escapeStart) }
                guard i + 1 < count else { throw unexpectedEnd() }
                guard base[i + 1] == UInt8(ascii: "u") else { throw JSONError(kind: .invalidEscape, offset: escapeStart) }
                let low = try hex4(at: i + 2, escapeStart: escapeStart)
                guard low >= 0xDC00 && low <= 0xDFFF else { throw JSONError(kind: .invalidEscape, offset: escapeStart) }
                i += 6
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if unit >= 0xDC00 && unit <= 0xDFFF {
                throw JSONError(kind: .invalidEscape, offset: escapeStart)
            }
            UTF8Validation.append(scalar: scalar, to: &scratch)
            return
        default:
            throw JSONError(kind: .invalidEscape, offset: escapeStart, byte: e)
        }
        scratch.append(byte)
        i += 2
    }

    /// Four hex digits at `base[at...]`.
    private func hex4(at position: Int, escapeStart: Int) throws(JSONError) -> UInt16 {
        var value: UInt16 = 0
        for k in 0 ..< 4 {
            guard position + k < count else { throw unexpectedEnd() }
            let c = base[position + k]
            let digit: UInt8
            switch c {
            case .zero ... .nine: digit = c - .zero
            case UInt8(ascii: "a") ... UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A") ... UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: throw JSONError(kind: .invalidEscape, offset: escapeStart)
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    /// A String from bytes already validated as UTF-8.
    @inline(__always)
    static func makeString(_ bytes: UnsafePointer<UInt8>, count: Int) -> String {
        if count == 0 { return "" }
        return String(unsafeUninitializedCapacity: count) { buffer in
            UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: bytes, byteCount: count)
            return count
        }
    }
}
