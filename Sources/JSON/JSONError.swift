/// Why a byte sequence was rejected, and where.
///
/// `offset` is a byte offset into the input (for a `String` input: into its UTF-8 bytes).
/// Equality compares `kind` and `offset` only; `byte` is extra detail for the message.
public struct JSONError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The input ended inside a value (open string, container, literal or escape).
        case unexpectedEnd
        /// A byte that cannot appear here (`byte` holds it).
        case unexpectedCharacter
        /// A malformed number: leading zero, lone `-`, `1.`, `.5`, `+1`, `1e`. `offset` is where the number starts.
        case invalidNumber
        /// A well-formed number whose value is infinite as a Double (e.g. `1e400`). `offset` is where it starts.
        case numberOutOfRange
        /// A bad backslash escape, a bad `\u` hex digit, or a lone surrogate escape. `offset` is the backslash.
        case invalidEscape
        /// A string holds bytes that are not valid UTF-8 (overlong, surrogate, > U+10FFFF, truncated). `offset` is the sequence's first byte.
        case invalidUTF8
        /// A raw byte below 0x20 inside a string.
        case controlCharacterInString
        /// Containers nested deeper than `maxDepth`. `offset` is the opening bracket that went too deep.
        case tooDeep
        /// Something other than whitespace after the value.
        case trailingData
        /// The input is empty or only whitespace.
        case empty
    }

    public let kind: Kind
    public let offset: Int
    /// The offending byte, when there is a single one to show.
    public let byte: UInt8?

    public init(kind: Kind, offset: Int, byte: UInt8? = nil) {
        self.kind = kind
        self.offset = offset
        self.byte = byte
    }

    public static func == (lhs: JSONError, rhs: JSONError) -> Bool {
        lhs.kind == rhs.kind && lhs.offset == rhs.offset
    }

    public var description: String {
        "invalid JSON at byte \(offset): \(reason)"
    }

    private var reason: String {
        switch kind {
        case .unexpectedEnd: return "unexpected end of input"
        case .unexpectedCharacter: return "unexpected character \(Self.show(byte))"
        case .invalidNumber: return "invalid number"
        case .numberOutOfRange: return "number out of range"
        case .invalidEscape: return "invalid escape sequence"
        case .invalidUTF8: return "invalid UTF-8 in string"
        case .controlCharacterInString: return "control character \(Self.show(byte)) in string"
        case .tooDeep: return "nesting too deep"
        case .trailingData: return "unexpected data after the value: \(Self.show(byte))"
        case .empty: return "empty input"
        }
    }

    private static func show(_ byte: UInt8?) -> String {
        guard let byte else { return "" }
        if byte > 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        let hex = String(byte, radix: 16, uppercase: true)
        return byte < 0x10 ? "0x0\(hex)" : "0x\(hex)"
    }
}
