/// A parsed JSON value.
///
/// Equality: strings and object keys compare by UTF-8 bytes; objects ignore key order;
/// `.integer(1)` and `.double(1.0)` are different values (use `doubleValue` / `int64Value` to compare numerically).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number literal with no fraction or exponent that fits Int64.
    case integer(Int64)
    /// Any other finite number (fraction, exponent, or an integer beyond Int64).
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// An object; keeps key order.
    case object(JSONObject)

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.integer(a), .integer(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return utf8Equal(a, b)
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null:
            hasher.combine(0 as UInt8)
        case .bool(let b):
            hasher.combine(1 as UInt8)
            hasher.combine(b)
        case .integer(let i):
            hasher.combine(2 as UInt8)
            hasher.combine(i)
        case .double(let d):
            hasher.combine(3 as UInt8)
            hasher.combine(d)
        case .string(let s):
            hasher.combine(4 as UInt8)
            hashUTF8(s, into: &hasher)
        case .array(let a):
            hasher.combine(5 as UInt8)
            hasher.combine(a)
        case .object(let o):
            hasher.combine(6 as UInt8)
            hasher.combine(o)
        }
    }
}

// MARK: - Typed accessors (nil on type mismatch)

extension JSONValue {
    /// The member `key` of an object; nil when missing or when this is not an object.
    public subscript(_ key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// The element at `index` of an array; nil when out of range or when this is not an array.
    public subscript(_ index: Int) -> JSONValue? {
        guard case .array(let array) = self, array.indices.contains(index) else { return nil }
        return array[index]
    }

    public var stringValue: String? {
        guard case .string(let s) = self else { return nil }
        return s
    }

    public var boolValue: Bool? {
        guard case .bool(let b) = self else { return nil }
        return b
    }

    /// `.integer`, or a `.double` that is integral and within Int64's range.
    public var int64Value: Int64? {
        switch self {
        case .integer(let i): return i
        case .double(let d):
            // Range check first (NaN fails it); then a truncating conversion that must be exact.
            guard d >= -9_223_372_036_854_775_808.0 && d < 9_223_372_036_854_775_808.0 else { return nil }
            let i = Int64(d)
            return Double(i) == d ? i : nil
        default: return nil
        }
    }

    /// `.integer` (converted, possibly rounded beyond 2^53) or `.double`.
    public var doubleValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var objectValue: JSONObject? {
        guard case .object(let o) = self else { return nil }
        return o
    }

    public var arrayValue: [JSONValue]? {
        guard case .array(let a) = self else { return nil }
        return a
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

// MARK: - Literals

// Deliberately not ExpressibleByNilLiteral: with it, `condition ? value : nil` silently means `.null` where an
// optional was meant. JSON null is spelled `.null`.
extension JSONValue: ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Keeps the literal's order; on a repeated key the last value wins.
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(JSONObject(elements)) }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON text (same as `serialized()`).
    public var description: String { serialized() }
}
