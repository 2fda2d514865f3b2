import JSON
import Testing

struct InvalidCase: Sendable, CustomTestStringConvertible {
    let input: [UInt8]
    let kind: JSONError.Kind
    let offset: Int

    init(_ text: String, _ kind: JSONError.Kind, _ offset: Int) {
        self.init(Array(text.utf8), kind, offset)
    }

    init(_ bytes: [UInt8], _ kind: JSONError.Kind, _ offset: Int) {
        input = bytes
        self.kind = kind
        self.offset = offset
    }

    var testDescription: String {
        "\(String(decoding: input.prefix(40), as: UTF8.self).debugDescription) → \(kind) @\(offset)"
    }
}

@Suite("Rejecting invalid JSON")
struct ParserInvalidTests {
    static let syntax: [InvalidCase] = [
        .init("", .empty, 0),
        .init("   \n\t", .empty, 5),
        .init("{", .unexpectedEnd, 1),
        .init("[", .unexpectedEnd, 1),
        .init("[1", .unexpectedEnd, 2),
        .init("[1,", .unexpectedEnd, 3),
        .init(#"{"a""#, .unexpectedEnd, 4),
        .init(#"{"a":"#, .unexpectedEnd, 5),
        .init(#"{"a":1"#, .unexpectedEnd, 6),
        .init(#"{"a":1,"#, .unexpectedEnd, 7),
        .init("\"abc", .unexpectedEnd, 4),
        .init("\"abc\\", .unexpectedEnd, 5),
        .init("\"\\u12", .unexpectedEnd, 5),
        .init("\"\\ud83d", .unexpectedEnd, 7),
        .init("\"\\ud83d\\", .unexpectedEnd, 8),
        .init("\"\\ud83d\\ude0", .unexpectedEnd, 12),
        .init("tru", .unexpectedEnd, 3),
        .init("[nul", .unexpectedEnd, 4),
        // Trailing commas, missing separators, wrong tokens.
        .init("[1,]", .unexpectedCharacter, 3),
        .init(#"{"a":1,}"#, .unexpectedCharacter, 7),
        .init("[,1]", .unexpectedCharacter, 1),
        .init("[1 2]", .unexpectedCharacter, 3),
        .init(#"{"a" 1}"#, .unexpectedCharacter, 5),
        .init(#"{"a":}"#, .unexpectedCharacter, 5),
        .init(#"{"a":1 "b":2}"#, .unexpectedCharacter, 7),
        .init("{1:2}", .unexpectedCharacter, 1),
        .init("{a:1}", .unexpectedCharacter, 1),
        .init("[1}", .unexpectedCharacter, 2),
        .init(#"{"a":1]"#, .unexpectedCharacter, 6),
        .init("]", .unexpectedCharacter, 0),
        .init("}", .unexpectedCharacter, 0),
        .init(":", .unexpectedCharacter, 0),
        // Single quotes, comments, bare words.
        .init("'a'", .unexpectedCharacter, 0),
        .init("{'a':1}", .unexpectedCharacter, 1),
        .init("// comment\n1", .unexpectedCharacter, 0),
        .init("/* c */ 1", .unexpectedCharacter, 0),
        .init("1 // c", .trailingData, 2),
        .init("[1 /* c */]", .unexpectedCharacter, 3),
        .init("NaN", .unexpectedCharacter, 0),
        .init("Infinity", .unexpectedCharacter, 0),
        .init("[NaN]", .unexpectedCharacter, 1),
        .init("True", .unexpectedCharacter, 0),
        .init("trUe", .unexpectedCharacter, 2),
        .init("nulL", .unexpectedCharacter, 3),
        .init("undefined", .unexpectedCharacter, 0),
        // Whitespace other than space/tab/CR/LF, BOM.
        .init("\u{FEFF}1", .unexpectedCharacter, 0),
        .init("\u{0B}1", .unexpectedCharacter, 0),
        .init("\u{0C}1", .unexpectedCharacter, 0),
        .init("[1,\u{A0}2]", .unexpectedCharacter, 3),
        .init([0x00], .unexpectedCharacter, 0),
        .init([0xC3, 0xA9], .unexpectedCharacter, 0),
        // Numbers.
        .init("01", .invalidNumber, 0),
        .init("-01", .invalidNumber, 0),
        .init("00", .invalidNumber, 0),
        .init("[1,012]", .invalidNumber, 3),
        .init("+1", .invalidNumber, 0),
        .init("-", .invalidNumber, 0),
        .init("[-]", .invalidNumber, 1),
        .init("- 1", .invalidNumber, 0),
        .init("1.", .invalidNumber, 0),
        .init("[1.]", .invalidNumber, 1),
        .init(".5", .invalidNumber, 0),
        .init("-.5", .invalidNumber, 0),
        .init("1.e5", .invalidNumber, 0),
        .init("1e", .invalidNumber, 0),
        .init("1e+", .invalidNumber, 0),
        .init("1E-", .invalidNumber, 0),
        .init("-Infinity", .invalidNumber, 0),
        .init("-a", .invalidNumber, 0),
        .init("0x10", .trailingData, 1),
        .init("1.5.5", .trailingData, 3),
        .init("1e5e5", .trailingData, 3),
        .init("1e400", .numberOutOfRange, 0),
        .init("-1e400", .numberOutOfRange, 0),
        .init("[0, 1.8e308]", .numberOutOfRange, 4),
        .init("1" + String(repeating: "0", count: 400), .numberOutOfRange, 0),
        .init("1e99999999999999999999999", .numberOutOfRange, 0),
        // Trailing data.
        .init("1 2", .trailingData, 2),
        .init("{}x", .trailingData, 2),
        .init("[] []", .trailingData, 3),
        .init("\"a\"\"b\"", .trailingData, 3),
        .init("nullx", .trailingData, 4),
        .init("[1]]", .trailingData, 3),
        .init("1\u{0}", .trailingData, 1),
        // Strings: escapes and control characters.
        .init(#""a\x""#, .invalidEscape, 2),
        .init(#""\'""#, .invalidEscape, 1),
        .init(#""\U0041""#, .invalidEscape, 1),
        .init(#""\u12G4""#, .invalidEscape, 1),
        .init(#""\u 123""#, .invalidEscape, 1),
        .init(#""\uD800""#, .invalidEscape, 1),
        .init(#""\udbff""#, .invalidEscape, 1),
        .init(#""\uDC00""#, .invalidEscape, 1),
        .init(#""ab\udfff\ud800""#, .invalidEscape, 3),
        .init(#""\uD800\u0041""#, .invalidEscape, 1),
        .init(#""\uD800\uD800""#, .invalidEscape, 1),
        .init(#""\uD800\n""#, .invalidEscape, 1),
        .init(#""\uD800x""#, .invalidEscape, 1),
        .init(#"{"\q":1}"#, .invalidEscape, 2),
        .init("\"a\tb\"", .controlCharacterInString, 2),
        .init("\"a\nb\"", .controlCharacterInString, 2),
        .init("\"\u{0}\"", .controlCharacterInString, 1),
        .init("\"\u{1F}\"", .controlCharacterInString, 1),
        .init("\"\\n\r\"", .controlCharacterInString, 3),
        .init("{\"a\u{1}\":1}", .controlCharacterInString, 3),
    ]

    static let utf8: [InvalidCase] = [
        .init([0x22, 0xC0, 0xAF, 0x22], .invalidUTF8, 1),  // overlong "/"
        .init([0x22, 0xC1, 0xBF, 0x22], .invalidUTF8, 1),  // overlong
        .init([0x22, 0xE0, 0x80, 0xAF, 0x22], .invalidUTF8, 1),  // overlong, 3 bytes
        .init([0x22, 0xE0, 0x9F, 0xBF, 0x22], .invalidUTF8, 1),  // overlong U+07FF
        .init([0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], .invalidUTF8, 1),  // overlong, 4 bytes
        .init([0x22, 0xF0, 0x8F, 0xBF, 0xBF, 0x22], .invalidUTF8, 1),  // overlong U+FFFF
        .init([0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, 1),  // U+D800 encoded
        .init([0x22, 0xED, 0xBF, 0xBF, 0x22], .invalidUTF8, 1),  // U+DFFF encoded
        .init([0x22, 0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80, 0x22], .invalidUTF8, 1),  // CESU-8 pair
        .init([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8, 1),  // U+110000
        .init([0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xF8, 0x88, 0x80, 0x80, 0x80, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xFE, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xFF, 0x22], .invalidUTF8, 1),
        .init([0x22, 0x80, 0x22], .invalidUTF8, 1),  // lone continuation
        .init([0x22, 0x61, 0xBF, 0x22], .invalidUTF8, 2),
        .init([0x22, 0xC3, 0x22], .invalidUTF8, 1),  // truncated by the quote
        .init([0x22, 0xC3, 0x28, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xE2, 0x82, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xF0, 0x9F, 0x98, 0x22], .invalidUTF8, 1),
        .init([0x22, 0xC3], .invalidUTF8, 1),  // truncated by the end of input
        .init([0x22, 0xF0, 0x9F, 0x98], .invalidUTF8, 1),
        .init([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], .invalidUTF8, 3),  // after an escape (slow path)
        .init([0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, 3),
        .init([0x7B, 0x22, 0xC3, 0x28, 0x22, 0x3A, 0x31, 0x7D], .invalidUTF8, 2),  // in a key
        .init([0x5B, 0x22, 0x6F, 0x6B, 0x22, 0x2C, 0x22, 0xFF, 0x22, 0x5D], .invalidUTF8, 7),
    ]

    @Test("syntax errors", arguments: syntax)
    func syntaxErrors(_ c: InvalidCase) {
        let error = parseError(c.input)
        #expect(error?.kind == c.kind)
        #expect(error?.offset == c.offset)
    }

    @Test("invalid UTF-8", arguments: utf8)
    func invalidUTF8(_ c: InvalidCase) {
        let error = parseError(c.input)
        #expect(error?.kind == c.kind)
        #expect(error?.offset == c.offset)
    }

    @Test func errorDescriptions() {
        let error = parseError(#"{"name":"a",x}"#)
        #expect(error == JSONError(kind: .unexpectedCharacter, offset: 12))
        #expect(error?.description == "invalid JSON at byte 12: unexpected character 'x'")
        #expect(parseError("")?.description == "invalid JSON at byte 0: empty input")
        #expect(parseError("[1")?.description == "invalid JSON at byte 2: unexpected end of input")
        #expect(parseError("\"\u{1}\"")?.description == "invalid JSON at byte 1: control character 0x01 in string")
        #expect(parseError("1 x")?.description == "invalid JSON at byte 2: unexpected data after the value: 'x'")
        #expect(parseError("[\n]x")?.description.hasPrefix("invalid JSON at byte 3") == true)
        let errors: [JSONError.Kind] = [
            .unexpectedEnd, .unexpectedCharacter, .invalidNumber, .numberOutOfRange, .invalidEscape, .invalidUTF8,
            .controlCharacterInString, .tooDeep, .trailingData, .empty,
        ]
        for kind in errors {
            #expect(JSONError(kind: kind, offset: 3).description.hasPrefix("invalid JSON at byte 3: "))
        }
    }

    @Test("10 MB of [ is rejected as too deep without touching the stack")
    func bracketBomb() {
        let bomb = [UInt8](repeating: UInt8(ascii: "["), count: 10 << 20)
        #expect(parseError(bomb) == JSONError(kind: .tooDeep, offset: JSONParser.defaultMaxDepth))

        let objectBomb = [UInt8](String(repeating: #"{"a":"#, count: 2 << 20).utf8)
        #expect(parseError(objectBomb) == JSONError(kind: .tooDeep, offset: 5 * JSONParser.defaultMaxDepth))

        let mixed = [UInt8](String(repeating: #"[{"":"#, count: 2 << 20).utf8)
        #expect(parseError(mixed)?.kind == .tooDeep)
    }

    @Test("no depth limit: a deep unterminated input still fails without recursion")
    func unlimitedDepthBomb() {
        let bomb = [UInt8](repeating: UInt8(ascii: "["), count: 1 << 20)
        #expect(parseError(bomb, maxDepth: .max) == JSONError(kind: .unexpectedEnd, offset: 1 << 20))
        let objects = [UInt8](String(repeating: #"{"k":["#, count: 100_000).utf8) + [UInt8(ascii: "x")]
        #expect(parseError(objects, maxDepth: .max) == JSONError(kind: .unexpectedCharacter, offset: 600_000))
    }

    @Test func errorsInsideLargeContainersReleaseEverything() {
        // Values pending on the parser's stack are destroyed on error (checked by the sanitizer-free path: no crash).
        let items = (0 ..< 5000).map { "\"item number \($0) with a long heap string\"" }.joined(separator: ",")
        #expect(parseError("[{\"a\":[" + items + "],\"b\":[" + items + ",]}]")?.kind == .unexpectedCharacter)
        #expect(parseError("{\"a\":[" + items + "],\"b\":" + items)?.kind == .unexpectedCharacter)
    }
}
