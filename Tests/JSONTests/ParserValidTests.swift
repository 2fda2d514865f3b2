import JSON
import Testing

@Suite("Parsing valid JSON")
struct ParserValidTests {
    static let validForms: [String] = [
        "null", "true", "false", "0", "-0", "1", "-1", "123456789", "1.5", "-1.5", "0.5", "1e5", "1E5", "1e+5", "1e-5",
        "1.5e10", "-1.5E-10", "0.0", "0e0", "-0.0", "1e0001", "1.7976931348623157e308", "5e-324",
        "2.2250738585072014e-308", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "123456789012345678901234567890", "\"\"", "\"a\"", #""\"\\\/\b\f\n\r\t""#, #""\u0000""#, #""\u00e9\u00E9""#,
        "\"é\"", #""\ud83d\ude00""#, "\"😀\"", "\"\u{7F}\"", "\"\u{2028}\u{2029}\"", "[]", "{}", "[1,2,3]", " [ 1 , 2 ] ",
        "\t\r\n{ \"a\" : [ true , null ] }\n", #"{"a":{"b":{"c":[]}}}"#, "[[],[[]],{}]", #"{"":""}"#,
        #"[1,-1,1.5,"x",true,false,null,{"k":[{}]}]"#,
    ] + protocolPayloads

    @Test("every valid form round-trips", arguments: validForms)
    func roundTrip(_ text: String) throws {
        try checkRoundTrip(text)
    }

    /// The shipped thing models, as read from their files.
    @Test func theShippedThingModelsRoundTrip() throws {
        let models = try shippedModelTexts()
        for text in models { try checkRoundTrip(text) }
        let products = try models.map { try JSONParser.parse($0)["productId"]?.stringValue }
        #expect(products.contains("p-light-1"), "\(products)")
    }

    func checkRoundTrip(_ text: String) throws {
        let value = try JSONParser.parse(text)
        let compact = value.serialized()
        let reparsed = try JSONParser.parse(compact)
        #expect(reparsed == value)
        #expect(reparsed.serialized() == compact)
        #expect(try JSONParser.parse(value.prettyPrinted()) == value)
        #expect(try JSONParser.parse(value.serialized(sortedKeys: true)) == value)
        #expect(value.serializedBytes() == Array(compact.utf8))
    }

    @Test func scalars() throws {
        #expect(try JSONParser.parse("null") == .null)
        #expect(try JSONParser.parse("true") == .bool(true))
        #expect(try JSONParser.parse("false") == .bool(false))
        #expect(try JSONParser.parse("0") == .integer(0))
        #expect(try JSONParser.parse("-0") == .integer(0))
        #expect(try JSONParser.parse("42") == .integer(42))
        #expect(try JSONParser.parse("-42") == .integer(-42))
        #expect(try JSONParser.parse("1764450000000") == .integer(1_764_450_000_000))
        #expect(try JSONParser.parse("1.5") == .double(1.5))
        #expect(try JSONParser.parse("1e5") == .double(100_000))
        #expect(try JSONParser.parse("1.0") == .double(1))
        #expect(try JSONParser.parse("-0.0").doubleValue?.sign == .minus)
        #expect(try JSONParser.parse("0e-99999999999999999999") == .double(0))
        #expect(try JSONParser.parse("1e-400") == .double(0))
        #expect(try JSONParser.parse("\"hi\"") == .string("hi"))
        #expect(try JSONParser.parse(" \t\r\n7 \t\r\n") == .integer(7))
    }

    @Test func bigIntegers() throws {
        #expect(try JSONParser.parse("9223372036854775807") == .integer(Int64.max))
        #expect(try JSONParser.parse("-9223372036854775808") == .integer(Int64.min))
        #expect(try JSONParser.parse("9223372036854775808") == .double(9_223_372_036_854_775_808.0))
        #expect(try JSONParser.parse("-9223372036854775809") == .double(-9_223_372_036_854_775_809.0))
        #expect(try JSONParser.parse("18446744073709551616") == .double(18_446_744_073_709_551_616.0))
        #expect(try JSONParser.parse("99999999999999999999") == .double(1e20))
        #expect(try JSONParser.parse("1" + String(repeating: "0", count: 308)) == .double(1e308))
        #expect(try JSONParser.parse("9223372036854775808").int64Value == nil)
        #expect(try JSONParser.parse("9007199254740993") == .integer(9_007_199_254_740_993))
    }

    /// Decimal-to-double must be correctly rounded on both the fast and the slow path.
    @Test(arguments: [
        "0.1", "0.2", "0.3", "1.1", "3.14159", "123.456e-2", "2.2250738585072011e-308", "2.2250738585072012e-308",
        "1.00000000000000011102230246251565404236316680908203125", "9007199254740993.0", "9007199254740993e0",
        "1e23", "8.98846567431158e307", "4.9406564584124654e-324", "2.4703282292062328e-324", "1e22", "1e-22",
        "123456789012345678", "0.000001", "7.0e-10", "1.7976931348623157e308", "1.7976931348623158e308",
        "4503599627370496.5", "4503599627370497.5", "-12.5e-3", "1234567890123456789.5", "0.30000000000000004",
    ])
    func doublesAreCorrectlyRounded(_ text: String) throws {
        let expected = try #require(Double(text))
        let value = try JSONParser.parse(text)
        #expect(value.doubleValue == expected, "\(text)")
        if let d = value.doubleValue {
            #expect(d.bitPattern == expected.bitPattern, "\(text)")
        }
    }

    @Test func unicodeEscapes() throws {
        #expect(try JSONParser.parse(#""\u0041\u00e9\u4E2D""#) == .string("Aé中"))
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSONParser.parse(#""\uD83D\uDE00""#) == .string("😀"))
        #expect(try JSONParser.parse(#""\udbff\udfff""#) == .string("\u{10FFFF}"))
        #expect(try JSONParser.parse(#""\ud800\udc00""#) == .string("\u{10000}"))
        #expect(try JSONParser.parse(#""a\u0000b""#) == .string("a\u{0}b"))
        #expect(try JSONParser.parse(#""\uFFFF\uFEFF""#) == .string("\u{FFFF}\u{FEFF}"))
        #expect(try JSONParser.parse(#""x😀y\ud83d\ude00z""#) == .string("x😀y😀z"))
        #expect(try JSONParser.parse(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{8}\u{C}\n\r\t"))
        #expect(try JSONParser.parse(#""plain then \n then é""#) == .string("plain then \n then é"))
        #expect(try JSONParser.parse(#"{"k\u00e9y":1}"#)["kéy"] == .integer(1))
    }

    @Test("valid UTF-8 at the edges of each range", arguments: [
        [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
        [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF3, 0xBF, 0xBF, 0xBF],
    ] as [[UInt8]])
    func validUTF8(_ sequence: [UInt8]) throws {
        let value = try JSONParser.parse([0x22] + sequence + [0x22])
        #expect(value.stringValue.map { Array($0.utf8) } == sequence)
        let inKey = try JSONParser.parse([0x7B, 0x22] + sequence + Array(#"\n":1}"#.utf8))
        #expect(inKey.objectValue?.keys.first.map { Array($0.utf8) } == sequence + [0x0A])
    }

    @Test func structure() throws {
        let value = try JSONParser.parse(#"{"b":[1,{"c":null}],"a":"x","e":{}}"#)
        #expect(value.objectValue?.keys == ["b", "a", "e"])
        #expect(value["b"]?[0] == .integer(1))
        #expect(value["b"]?[1]?["c"]?.isNull == true)
        #expect(value["b"]?[2] == nil)
        #expect(value["a"]?.stringValue == "x")
        #expect(value["e"] == .object(JSONObject()))
        #expect(value == ["b": [1, ["c": .null]], "a": "x", "e": [:]])
    }

    @Test func duplicateKeysLastWins() throws {
        let value = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(value.objectValue?.keys == ["a", "b"])
        #expect(value["a"] == .integer(3))
        #expect(value.objectValue?.count == 2)

        let nested = try JSONParser.parse(#"{"d":{"x":1,"x":{"y":2},"x":[3]}}"#)
        #expect(nested["d"]?["x"] == [3])

        // Past the small-object threshold the hash-based path is used.
        var members = (0 ..< 40).map { "\"k\($0)\":\($0)" }
        members.append("\"k7\":\"last\"")
        members.append("\"k39\":null")
        let big = try JSONParser.parse("{" + members.joined(separator: ",") + "}")
        #expect(big.objectValue?.count == 40)
        #expect(big.objectValue?.keys == (0 ..< 40).map { "k\($0)" })
        #expect(big["k7"] == "last")
        #expect(big["k39"] == .null)
        #expect(big["k8"] == 8)
    }

    @Test func keysCompareByBytesNotCanonicalEquivalence() throws {
        // "é" precomposed and decomposed are canonically equivalent Swift Strings, but different JSON keys.
        let value = try JSONParser.parse("{\"\u{E9}\":1,\"e\u{301}\":2}")
        #expect(value.objectValue?.count == 2)
        #expect(value["\u{E9}"] == 1)
        #expect(value["e\u{301}"] == 2)
        #expect(JSONValue.string("\u{E9}") != JSONValue.string("e\u{301}"))
    }

    @Test func depthLimit() throws {
        let limit = JSONParser.defaultMaxDepth
        let ok = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        #expect(parseError(ok) == nil)
        let tooDeep = "[" + ok + "]"
        #expect(parseError(tooDeep) == JSONError(kind: .tooDeep, offset: limit))

        let objects = String(repeating: #"{"a":"#, count: limit) + "1" + String(repeating: "}", count: limit)
        #expect(parseError(objects) == nil)
        let objectsTooDeep = #"{"a":"# + objects + "}"
        #expect(parseError(objectsTooDeep) == JSONError(kind: .tooDeep, offset: 5 * limit))

        #expect(parseError("1", maxDepth: 0) == nil)
        #expect(parseError("[]", maxDepth: 0) == JSONError(kind: .tooDeep, offset: 0))
        #expect(parseError("{}", maxDepth: -5) == JSONError(kind: .tooDeep, offset: 0))
        #expect(parseError("[[1]]", maxDepth: 2) == nil)
        #expect(parseError("[[[1]]]", maxDepth: 2) == JSONError(kind: .tooDeep, offset: 2))
        #expect(parseError("[[],{},[1]]", maxDepth: 2) == nil)
        #expect(parseError("[[],{},[[]]]", maxDepth: 2) == JSONError(kind: .tooDeep, offset: 8))

        let deep = 1000
        let deepText = String(repeating: "[", count: deep) + String(repeating: "]", count: deep)
        #expect(parseError(deepText, maxDepth: deep) == nil)
        #expect(parseError(deepText, maxDepth: deep - 1) == JSONError(kind: .tooDeep, offset: deep - 1))
    }

    @Test func inputForms() throws {
        let text = protocolPayloads[0]
        let fromString = try JSONParser.parse(text)
        let fromBytes = try JSONParser.parse(Array(text.utf8))
        let fromPointer = try Array(text.utf8).withUnsafeBytes { buffer in
            try JSONParser.parse(buffer)
        }
        let slice = Array("xx\(text)yy".utf8).dropFirst(2).dropLast(2)
        let fromSlice = try JSONParser.parse(slice)
        let fromSequence = try JSONParser.parse(text.utf8)
        #expect(fromString == fromSequence)
        #expect(fromString == fromBytes)
        #expect(fromString == fromPointer)
        #expect(fromString == fromSlice)
        #expect(fromString["data"]?["bright_value"]?["value"] == 800)
        #expect(fromString["data"]?["switch_1"]?["value"]?.boolValue == true)
        #expect(fromString["msgId"]?.stringValue == "45lkj3551234")
        #expect(fromString["time"]?.int64Value == 1_764_450_000_000)
    }
}
