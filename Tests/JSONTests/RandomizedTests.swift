import JSON
import Testing
import ThingAgent

/// Random values (seeded) for round-trip testing.
struct ValueGenerator {
    var rng: SeededGenerator

    static let scalarPool: [Unicode.Scalar] = {
        var pool: [Unicode.Scalar] = []
        pool += (0x20 ... 0x7E).compactMap(Unicode.Scalar.init)
        pool += (0x00 ... 0x1F).compactMap(Unicode.Scalar.init)
        pool += ["\"", "\\", "/", "\u{7F}", "\u{80}", "é", "ß", "\u{301}", "\u{7FF}", "\u{800}", "中", "日", "\u{2028}",
                 "\u{2029}", "\u{D7FF}", "\u{E000}", "\u{FEFF}", "\u{FFFD}", "\u{FFFF}", "\u{10000}", "😀", "🇫", "\u{10FFFF}"]
        return pool
    }()

    mutating func string() -> String {
        let length = Int.random(in: 0 ... 24, using: &rng)
        var s = String.UnicodeScalarView()
        for _ in 0 ..< length {
            s.append(Self.scalarPool.randomElement(using: &rng)!)
        }
        return String(s)
    }

    mutating func double() -> Double {
        switch Int.random(in: 0 ..< 5, using: &rng) {
        case 0:
            // Any finite bit pattern: subnormals, huge, tiny.
            while true {
                let d = Double(bitPattern: rng.next())
                if d.isFinite { return d }
            }
        case 1: return Double(Int.random(in: -1_000_000 ... 1_000_000, using: &rng)) / 100
        case 2: return Double.random(in: -1 ... 1, using: &rng)
        case 3: return Double(Int64.random(in: .min ... .max, using: &rng))
        default: return [0.0, -0.0, 1e22, 1e23, 9007199254740992, 9007199254740994, .greatestFiniteMagnitude, .leastNonzeroMagnitude,
                         .leastNormalMagnitude, 0.1, 1e-7, 1e21][Int.random(in: 0 ..< 12, using: &rng)]
        }
    }

    mutating func integer() -> Int64 {
        switch Int.random(in: 0 ..< 4, using: &rng) {
        case 0: return Int64.random(in: .min ... .max, using: &rng)
        case 1: return Int64.random(in: -1000 ... 1000, using: &rng)
        case 2: return [Int64.min, Int64.max, 0, -1, 1, 1_764_450_000_000][Int.random(in: 0 ..< 6, using: &rng)]
        default: return Int64.random(in: 1_000_000_000_000 ... 9_999_999_999_999, using: &rng)
        }
    }

    mutating func value(depth: Int = 0) -> JSONValue {
        let containers = depth < 6
        switch Int.random(in: 0 ..< (containers ? 9 : 6), using: &rng) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(integer())
        case 3: return .double(double())
        case 4, 5: return .string(string())
        case 6, 7:
            let n = Int.random(in: 0 ... 6, using: &rng)
            var pairs: [(String, JSONValue)] = []
            for _ in 0 ..< n {
                pairs.append((string(), value(depth: depth + 1)))
            }
            return .object(JSONObject(pairs))
        default:
            let n = Int.random(in: 0 ... 6, using: &rng)
            return .array((0 ..< n).map { _ in value(depth: depth + 1) })
        }
    }
}

@Suite("Randomized")
struct RandomizedTests {
    @Test("random values serialize and parse back equal")
    func randomRoundTrip() throws {
        var generator = ValueGenerator(rng: SeededGenerator(seed: 0x5EED_0001))
        for round in 0 ..< 4000 {
            let value = generator.value()
            let text = value.serialized()
            let back = try JSONParser.parse(text)
            #expect(back == value, "round \(round): \(text)")
            #expect(back.serialized() == text, "round \(round)")
            #expect(try JSONParser.parse(value.prettyPrinted(indent: round % 5)) == value, "round \(round)")
            #expect(try JSONParser.parse(value.serializedBytes(sortedKeys: true)) == value, "round \(round)")
            #expect(back.hashValue == value.hashValue)
        }
    }

    @Test("random strings survive escaping and unescaping")
    func randomStrings() throws {
        var generator = ValueGenerator(rng: SeededGenerator(seed: 0x5EED_0002))
        for _ in 0 ..< 3000 {
            let s = generator.string()
            let back = try JSONParser.parse(JSONValue.string(s).serialized())
            #expect(back.stringValue.map { Array($0.utf8) } == Array(s.utf8))
            // The same string written with \u escapes for every UTF-16 unit.
            let escaped = "\"" + s.utf16.map { unit in
                let hex = String(unit, radix: 16, uppercase: Bool.random(using: &generator.rng))
                return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }.joined() + "\""
            #expect(try JSONParser.parse(escaped).stringValue.map { Array($0.utf8) } == Array(s.utf8), "\(escaped)")
        }
    }

    @Test("mutated payloads never crash; whatever parses round-trips")
    func randomMutations() throws {
        var rng = SeededGenerator(seed: 0x5EED_0003)
        let seeds = (protocolPayloads + (try shippedModelTexts())).map { Array($0.utf8) }
        let interesting: [UInt8] = Array("{}[],:\"\\0123456789-+.eEtrufalsn \t\r\n/u".utf8)
            + [0x00, 0x01, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF]
        var accepted = 0
        for round in 0 ..< 6000 {
            var bytes = seeds.randomElement(using: &rng)!
            for _ in 0 ..< Int.random(in: 1 ... 4, using: &rng) {
                let position = bytes.isEmpty ? 0 : Int.random(in: 0 ..< bytes.count, using: &rng)
                switch Int.random(in: 0 ..< 7, using: &rng) {
                case 0 where !bytes.isEmpty: bytes[position] = interesting.randomElement(using: &rng)!
                case 1 where !bytes.isEmpty: bytes[position] = UInt8.random(in: 0 ... 255, using: &rng)
                case 2: bytes.insert(interesting.randomElement(using: &rng)!, at: position)
                case 3 where !bytes.isEmpty: bytes.remove(at: position)
                case 4: bytes = Array(bytes[..<position])
                case 5 where !bytes.isEmpty:
                    let end = min(bytes.count, position + Int.random(in: 1 ... 16, using: &rng))
                    bytes.insert(contentsOf: bytes[position ..< end], at: Int.random(in: 0 ... bytes.count, using: &rng))
                default:
                    if !bytes.isEmpty { bytes.swapAt(position, Int.random(in: 0 ..< bytes.count, using: &rng)) }
                }
            }
            let maxDepth = Int.random(in: 0 ... 40, using: &rng)
            do {
                let value = try JSONParser.parse(bytes, maxDepth: maxDepth)
                accepted += 1
                let text = value.serializedBytes()
                #expect(try JSONParser.parse(text, maxDepth: maxDepth) == value, "round \(round)")
                #expect(String(validating: bytes, as: UTF8.self) != nil, "accepted input must be UTF-8")
            } catch {
                #expect(error.offset >= 0 && error.offset <= bytes.count, "round \(round): \(error)")
                #expect(!error.description.isEmpty)
            }
        }
        // Mutations sometimes keep a payload valid; the round-trip branch must have been exercised.
        #expect(accepted > 100)
    }

    @Test("random bytes never crash")
    func randomBytes() {
        var rng = SeededGenerator(seed: 0x5EED_0004)
        let alphabet: [UInt8] = Array("{}[],:\"\\0123456789-.etrufalsn ".utf8) + [0x80, 0xC3, 0xE2, 0xF0, 0xFF, 0x00]
        for _ in 0 ..< 4000 {
            let n = Int.random(in: 0 ... 40, using: &rng)
            let bytes = (0 ..< n).map { _ in alphabet.randomElement(using: &rng)! }
            if let error = parseError(bytes) {
                #expect(error.offset >= 0 && error.offset <= bytes.count)
            }
        }
    }
}
