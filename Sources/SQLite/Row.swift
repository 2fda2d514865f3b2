/// One result row, copied out of the statement so it can outlive it and cross threads.
public struct Row: Sendable, Hashable {
    public let values: [SQLiteValue]
    /// Column names, shared (copy-on-write) by all rows of one query.
    public let columns: [String]

    public init(columns: [String], values: [SQLiteValue]) {
        precondition(columns.count == values.count, "Row: \(columns.count) columns but \(values.count) values")
        self.columns = columns
        self.values = values
    }

    public var count: Int { values.count }

    public subscript(_ i: Int) -> SQLiteValue { values[i] }

    /// The value of the named column, or nil when the row has no such column.
    /// Exact match first, then case-insensitive, as SQLite treats column names.
    public subscript(_ name: String) -> SQLiteValue? {
        guard let i = index(of: name) else { return nil }
        return values[i]
    }

    public func index(of name: String) -> Int? {
        if let i = columns.firstIndex(of: name) { return i }
        let lower = name.lowercased()
        return columns.firstIndex { $0.lowercased() == lower }
    }

    /// INTEGER, or a REAL with an exact integer value; nil otherwise (NULL, text, blob, missing column).
    public func int(_ name: String) -> Int64? {
        switch self[name] {
        case .integer(let v): v
        case .real(let v): Int64(exactly: v)
        default: nil
        }
    }

    /// REAL or INTEGER as Double; nil otherwise.
    public func double(_ name: String) -> Double? {
        switch self[name] {
        case .real(let v): v
        case .integer(let v): Double(v)
        default: nil
        }
    }

    /// TEXT; nil otherwise (no silent conversion of numbers or blobs).
    public func string(_ name: String) -> String? {
        if case .text(let v) = self[name] { return v }
        return nil
    }

    /// BLOB; nil otherwise.
    public func blob(_ name: String) -> [UInt8]? {
        if case .blob(let v) = self[name] { return v }
        return nil
    }

    /// SQLite stores booleans as integers: nonzero is true. nil for NULL and non-integers.
    public func bool(_ name: String) -> Bool? {
        if case .integer(let v) = self[name] { return v != 0 }
        return nil
    }
}

extension Row: CustomStringConvertible {
    public var description: String {
        "[" + zip(columns, values).map { "\($0): \($1)" }.joined(separator: ", ") + "]"
    }
}
