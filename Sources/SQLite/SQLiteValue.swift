/// One SQLite value, in SQLite's five storage classes.
///
/// Note: SQLite stores a bound `Double.nan` as NULL.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

// Literals keep binding arrays short at call sites: `db.run("... VALUES (?, ?)", [42, "x"])`.
// There is deliberately no nil literal: `SQLiteValue?` is returned by `scalar`, and `nil` must keep
// meaning "no row" there; write `.null` for NULL.
extension SQLiteValue: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByStringLiteral,
    ExpressibleByBooleanLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    /// SQLite has no boolean type; it stores booleans as 0 and 1.
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
}

extension SQLiteValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .null: "NULL"
        case .integer(let v): String(v)
        case .real(let v): String(v)
        case .text(let v): "'" + v.replacingAll("'", with: "''") + "'"
        case .blob(let v): "x'" + v.map { byte in hexDigits(byte) }.joined() + "'"
        }
    }
}

private func hexDigits(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
}

extension String {
    // Foundation-free, so the module links without it.
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        result.reserveCapacity(utf8.count)
        for c in self {
            if c == target { result += replacement } else { result.append(c) }
        }
        return result
    }
}
