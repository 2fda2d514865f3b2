import JSON
import Testing

@Suite("Serializing")
struct SerializerTests {
    @Test func scalars() {
        #expect(JSONValue.null.serialized() == "null")
        #expect(JSONValue.bool(true).serialized() == "true")
        #expect(JSONValue.bool(false).serialized() == "false")
        #expect(JSONValue.integer(0).serialized() == "0")
        #expect(JSONValue.integer(-7).serialized() == "-7")
        #expect(JSONValue.integer(Int64.max).serialized() == "9223372036854775807")
        #expect(JSONValue.integer(Int64.min).serialized() == "-9223372036854775808")
        #expect(JSONValue.integer(1_764_450_000_000).serialized() == "1764450000000")
    }

    @Test func doubles() throws {
        #expect(JSONValue.double(1).serialized() == "1.0")
        #expect(JSONValue.double(0.1).serialized() == "0.1")
        #expect(JSONValue.double(-2.5).serialized() == "-2.5")
        #expect(JSONValue.double(1e21).serialized() == "1e+21")
        #expect(JSONValue.double(1e-7).serialized() == "1e-07")
        #expect(JSONValue.double(-0.0).serialized() == "-0.0")
        #expect(JSONValue.double(.greatestFiniteMagnitude).serialized() == "1.7976931348623157e+308")
        #expect(JSONValue.double(.leastNonzeroMagnitude).serialized() == "5e-324")
        #expect(JSONValue.double(.nan).serialized() == "null")
        #expect(JSONValue.double(.infinity).serialized() == "null")
        #expect(JSONValue.double(-.infinity).serialized() == "null")
        #expect(JSONValue.array([1.5, .double(.nan)]).serialized() == "[1.5,null]")
        // Every printed double parses back as a double with the same bits.
        for d in [0.1, 1.0 / 3, 1e300, 123456.789, 9.007199254740993e15, 2.2250738585072014e-308, .leastNonzeroMagnitude] {
            let back = try JSONParser.parse(JSONValue.double(d).serialized())
            #expect(back.doubleValue?.bitPattern == d.bitPattern)
            #expect(back == .double(d))
        }
    }

    @Test func stringEscapes() {
        #expect(JSONValue.string("plain").serialized() == #""plain""#)
        #expect(JSONValue.string("").serialized() == #""""#)
        #expect(JSONValue.string("a\"b\\c/d").serialized() == #""a\"b\\c/d""#)
        #expect(JSONValue.string("\n\r\t\u{8}\u{C}").serialized() == #""\u000a\u000d\u0009\u0008\u000c""#)
        #expect(JSONValue.string("\u{0}\u{1}\u{1F}\u{20}\u{7F}").serialized() == "\"\\u0000\\u0001\\u001f \u{7F}\"")
        #expect(JSONValue.string("é日本😀\u{2028}").serialized() == "\"é日本😀\u{2028}\"")
        #expect(JSONValue.string("\u{E9}").serializedBytes() == [0x22, 0xC3, 0xA9, 0x22])
        #expect(JSONValue.string("e\u{301}").serializedBytes() == [0x22, 0x65, 0xCC, 0x81, 0x22])
        #expect(JSONValue.object(JSONObject([("k\"\n", 1)])).serialized() == #"{"k\"\u000a":1}"#)
        // A long string with escapes spread through it (run copying).
        let long = String(repeating: "abc\"def\\", count: 100)
        #expect(JSONValue.string(long).serialized() == "\"" + String(repeating: #"abc\"def\\"#, count: 100) + "\"")
    }

    @Test func containers() {
        #expect(JSONValue.array([]).serialized() == "[]")
        #expect(JSONValue.object(JSONObject()).serialized() == "{}")
        let value: JSONValue = ["z": 1, "a": [true, .null, "x"], "m": ["q": [:], "b": []]]
        #expect(value.serialized() == #"{"z":1,"a":[true,null,"x"],"m":{"q":{},"b":[]}}"#)
        #expect(value.serialized(sortedKeys: true) == #"{"a":[true,null,"x"],"m":{"b":[],"q":{}},"z":1}"#)
        #expect(value.description == value.serialized())
        #expect(value.objectValue?.description == value.serialized())
    }

    @Test func sortedKeysUseUTF8ByteOrder() {
        let value: JSONValue = ["b": 1, "B": 2, "é": 3, "a": 4, "": 5, "aa": 6]
        #expect(value.serialized(sortedKeys: true) == #"{"":5,"B":2,"a":4,"aa":6,"b":1,"é":3}"#)
    }

    @Test func prettyPrinting() {
        let value: JSONValue = ["b": [1, 2.5], "a": ["x": .null, "e": [:], "l": []], "s": "v"]
        let expected = """
            {
              "b": [
                1,
                2.5
              ],
              "a": {
                "x": null,
                "e": {},
                "l": []
              },
              "s": "v"
            }
            """
        #expect(value.prettyPrinted() == expected)
        let sorted = """
            {
                "a": {
                    "e": {},
                    "l": [],
                    "x": null
                },
                "b": [
                    1,
                    2.5
                ],
                "s": "v"
            }
            """
        #expect(value.prettyPrinted(indent: 4, sortedKeys: true) == sorted)
        #expect(JSONValue.integer(3).prettyPrinted() == "3")
        #expect(JSONValue.array([]).prettyPrinted() == "[]")
    }

    @Test func protocolPayloadsSerializeCompactly() throws {
        let text = protocolPayloads[0]
        #expect(try JSONParser.parse(text).serialized() == text)
    }
}
