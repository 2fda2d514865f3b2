/// A strict RFC 8259 JSON parser over raw bytes.
///
/// Rejects comments, trailing commas, single quotes, NaN/Infinity, leading zeros, `+1`, `.5`, `1.`, invalid UTF-8
/// and raw control characters in strings, lone surrogate escapes, and anything but whitespace after the value.
/// Duplicate object keys: the last value wins, at the position of the first occurrence.
///
/// Nesting is parsed with an explicit stack (no recursion), so any input fails or succeeds without touching the
/// machine stack. `maxDepth` counts containers (`[]` is depth 1, a scalar depth 0); a negative value acts as 0.
/// Keep it modest: destroying, comparing, hashing and serializing a `JSONValue` recurse once per level, so values
/// nested tens of thousands of levels deep are not something to accept.
///
/// All entry points are thread-safe and allocation-light: strings without escapes are built straight from the
/// input bytes, integers never go through floating point, and the parser's own stack starts on the machine stack.
public struct JSONParser {
    public static let defaultMaxDepth = 32

    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONError(kind: .empty, offset: 0)
        }
        var parser = Parser(base: base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(buffer, maxDepth: maxDepth) }
        }
        return try result.get()
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }
        return try result.get()
    }

    /// Parses any byte sequence (e.g. `Data`, `ArraySlice<UInt8>`); offsets are relative to its start.
    /// Contiguous storage is read in place; anything else is copied first.
    public static func parse<Bytes: Sequence<UInt8>>(_ bytes: Bytes, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        let result = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONError) -> JSONValue in try parse(UnsafeRawBufferPointer(buffer), maxDepth: maxDepth) }
        }
        if let result { return try result.get() }
        return try parse(Array(bytes), maxDepth: maxDepth)
    }
}

/// The parsing state over one input buffer.
internal struct Parser {
    let base: UnsafePointer<UInt8>
    let count: Int
    let maxDepth: Int
    /// The next byte to read.
    var i = 0
    /// Reused for strings that contain escapes.
    var scratch: [UInt8] = []

    init(base: UnsafePointer<UInt8>, count: Int, maxDepth: Int) {
        self.base = base
        self.count = count
        self.maxDepth = max(0, maxDepth)
    }

    mutating func parseDocument() throws(JSONError) -> JSONValue {
        skipWhitespace()
        guard i < count else { throw JSONError(kind: .empty, offset: i) }
        let first = base[i]
        let value: JSONValue
        if first == .openBrace || first == .openBracket {
            value = try parseContainers()
        } else {
            value = try parseScalar(first)
        }
        skipWhitespace()
        if i < count { throw JSONError(kind: .trailingData, offset: i, byte: base[i]) }
        return value
    }

    /// Parses a value that starts with `[` or `{`, iteratively.
    private mutating func parseContainers() throws(JSONError) -> JSONValue {
        try withUnsafeTemporaryAllocation(
            byteCount: ContainerStack.inlineByteCount, alignment: ContainerStack.inlineAlignment
        ) { memory throws(JSONError) -> JSONValue in
            var stack = ContainerStack(memory: memory.baseAddress!)
            return try parseContainers(using: &stack)
        }
    }

    private mutating func parseContainers(using stack: inout ContainerStack) throws(JSONError) -> JSONValue {
        nextValue: while true {
            // Expecting a value at `i` (whitespace already skipped).
            guard i < count else { throw unexpectedEnd() }
            var value: JSONValue
            let c = base[i]
            if c == .openBrace || c == .openBracket {
                guard stack.depth < maxDepth else { throw JSONError(kind: .tooDeep, offset: i) }
                let isObject = c == .openBrace
                i += 1
                skipWhitespace()
                guard i < count else { throw unexpectedEnd() }
                if isObject {
                    if base[i] == .closeBrace {
                        i += 1
                        value = .object(JSONObject())
                    } else {
                        stack.pushFrame(isObject: true)
                        try parseKeyAndColon(into: &stack)
                        continue nextValue
                    }
                } else {
                    if base[i] == .closeBracket {
                        i += 1
                        value = .array([])
                    } else {
                        stack.pushFrame(isObject: false)
                        continue nextValue
                    }
                }
            } else {
                value = try parseScalar(c)
            }

            // A value is complete: add it to the open container, closing containers as they end.
            while true {
                guard stack.depth > 0 else { return value }
                stack.pushValue(value)
                skipWhitespace()
                guard i < count else { throw unexpectedEnd() }
                let d = base[i]
                if stack.topIsObject {
                    if d == .comma {
                        i += 1
                        skipWhitespace()
                        try parseKeyAndColon(into: &stack)
                        continue nextValue
                    }
                    guard d == .closeBrace else { throw unexpectedCharacter(at: i) }
                    i += 1
                    value = .object(stack.popObject())
                } else {
                    if d == .comma {
                        i += 1
                        skipWhitespace()
                        continue nextValue
                    }
                    guard d == .closeBracket else { throw unexpectedCharacter(at: i) }
                    i += 1
                    value = .array(stack.popArray())
                }
            }
        }
    }

    /// Reads `"key"` `:` and the whitespace after it.
    @inline(__always)
    private mutating func parseKeyAndColon(into stack: inout ContainerStack) throws(JSONError) {
        guard i < count else { throw unexpectedEnd() }
        guard base[i] == .quote else { throw unexpectedCharacter(at: i) }
        i += 1
        stack.pushKey(try parseString())
        skipWhitespace()
        guard i < count else { throw unexpectedEnd() }
        guard base[i] == .colon else { throw unexpectedCharacter(at: i) }
        i += 1
        skipWhitespace()
    }

    /// Parses a string, number or literal starting with byte `c` at `i`.
    @inline(__always)
    private mutating func parseScalar(_ c: UInt8) throws(JSONError) -> JSONValue {
        switch c {
        case .quote:
            i += 1
            return .string(try parseString())
        case .minus, .zero ... .nine:
            return try parseNumber()
        case UInt8(ascii: "t"):
            try matchLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try matchLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try matchLiteral("null")
            return .null
        case UInt8(ascii: "+"), UInt8(ascii: "."):
            throw JSONError(kind: .invalidNumber, offset: i, byte: c)
        default:
            throw unexpectedCharacter(at: i)
        }
    }

    @inline(__always)
    private mutating func matchLiteral(_ word: StaticString) throws(JSONError) {
        let w = word.utf8Start
        let n = word.utf8CodeUnitCount
        if i + n <= count {
            var k = 0
            while k < n, base[i + k] == w[k] { k += 1 }
            if k == n {
                i += n
                return
            }
            throw unexpectedCharacter(at: i + k)
        }
        var k = 0
        while i + k < count {
            guard base[i + k] == w[k] else { throw unexpectedCharacter(at: i + k) }
            k += 1
        }
        throw unexpectedEnd()
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while i < count {
            let b = base[i]
            guard b <= .space, b == .space || b == .newline || b == .carriageReturn || b == .tab else { return }
            i += 1
        }
    }

    // MARK: Errors

    func unexpectedEnd() -> JSONError {
        JSONError(kind: .unexpectedEnd, offset: count)
    }

    func unexpectedCharacter(at offset: Int) -> JSONError {
        JSONError(kind: .unexpectedCharacter, offset: offset, byte: base[offset])
    }
}

extension UInt8 {
    @inline(__always) static var quote: UInt8 { UInt8(ascii: "\"") }
    @inline(__always) static var backslash: UInt8 { UInt8(ascii: "\\") }
    @inline(__always) static var slash: UInt8 { UInt8(ascii: "/") }
    @inline(__always) static var openBrace: UInt8 { UInt8(ascii: "{") }
    @inline(__always) static var closeBrace: UInt8 { UInt8(ascii: "}") }
    @inline(__always) static var openBracket: UInt8 { UInt8(ascii: "[") }
    @inline(__always) static var closeBracket: UInt8 { UInt8(ascii: "]") }
    @inline(__always) static var comma: UInt8 { UInt8(ascii: ",") }
    @inline(__always) static var colon: UInt8 { UInt8(ascii: ":") }
    @inline(__always) static var minus: UInt8 { UInt8(ascii: "-") }
    @inline(__always) static var plus: UInt8 { UInt8(ascii: "+") }
    @inline(__always) static var dot: UInt8 { UInt8(ascii: ".") }
    @inline(__always) static var zero: UInt8 { UInt8(ascii: "0") }
    @inline(__always) static var nine: UInt8 { UInt8(ascii: "9") }
    @inline(__always) static var space: UInt8 { UInt8(ascii: " ") }
    @inline(__always) static var newline: UInt8 { UInt8(ascii: "\n") }
    @inline(__always) static var carriageReturn: UInt8 { UInt8(ascii: "\r") }
    @inline(__always) static var tab: UInt8 { UInt8(ascii: "\t") }
}
