internal import CSQLite

/// A prepared statement, meant to be prepared once and reused: bind, step or run, repeat.
///
/// Not Sendable: use it only under the same serialization as its `Database`. Finalized in deinit.
/// Parameter and column indexes follow SQLite: parameters start at 1, columns at 0.
public final class Statement {
    public let sql: String
    let connection: Connection
    private let handle: OpaquePointer
    /// True after `step()` returned a row: SQLite refuses new bindings until the statement is reset.
    private var needsReset = false

    init(connection: Connection, handle: OpaquePointer, sql: String) {
        self.connection = connection
        self.handle = handle
        self.sql = sql
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// Number of parameters (the largest index, for `?NNN` parameters).
    public var parameterCount: Int32 { sqlite3_bind_parameter_count(handle) }

    /// Index of a named parameter such as `:id`, `@id` or `$id` (include the prefix), or nil.
    public func parameterIndex(_ name: String) -> Int32? {
        let i = sqlite3_bind_parameter_index(handle, name)
        return i == 0 ? nil : i
    }

    // MARK: Binding

    /// Replaces all bindings: resets the statement, clears previous bindings, binds `values` from index 1.
    /// Throws `range` unless there is exactly one value per parameter, so a forgotten value fails
    /// loudly instead of being stored as NULL.
    public func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        reset()
        let expected = parameterCount
        guard values.count == Int(expected) else {
            throw SQLiteError(
                code: SQLiteError.range,
                message: "statement has \(expected) parameter(s) but \(values.count) value(s) were given",
                sql: sql
            )
        }
        for (i, value) in values.enumerated() {
            try bind(value, at: Int32(i + 1))
        }
    }

    public func bind(_ value: SQLiteValue, at index: Int32) throws(SQLiteError) {
        switch value {
        case .null: try bindNull(at: index)
        case .integer(let v): try bind(v, at: index)
        case .real(let v): try bind(v, at: index)
        case .text(let v): try bind(v, at: index)
        case .blob(let v): try bind(v, at: index)
        }
    }

    public func bind(_ value: Int64, at index: Int32) throws(SQLiteError) {
        try prepareToBind()
        try check(sqlite3_bind_int64(handle, index, value))
    }

    public func bind(_ value: Int, at index: Int32) throws(SQLiteError) {
        try bind(Int64(value), at: index)
    }

    public func bind(_ value: Double, at index: Int32) throws(SQLiteError) {
        try prepareToBind()
        try check(sqlite3_bind_double(handle, index, value))
    }

    /// SQLite has no boolean type: stored as 0 or 1.
    public func bind(_ value: Bool, at index: Int32) throws(SQLiteError) {
        try bind(Int64(value ? 1 : 0), at: index)
    }

    public func bind(_ value: String, at index: Int32) throws(SQLiteError) {
        try prepareToBind()
        // Bind by explicit byte count (embedded NULs survive) and SQLITE_TRANSIENT (SQLite copies
        // the bytes, since the Swift buffer is only valid inside the closure).
        var text = value
        let rc = text.withUTF8 { utf8 -> Int32 in
            guard let base = utf8.baseAddress, utf8.count > 0 else {
                // A NULL pointer would bind NULL, not the empty string.
                return sqlite3_bind_text(handle, index, "", 0, thing_sqlite_transient())
            }
            return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: utf8.count) { chars in
                sqlite3_bind_text64(
                    handle, index, chars, sqlite3_uint64(utf8.count), thing_sqlite_transient(), UInt8(SQLITE_UTF8))
            }
        }
        try check(rc)
    }

    public func bind(_ value: [UInt8], at index: Int32) throws(SQLiteError) {
        try prepareToBind()
        let rc = value.withUnsafeBytes { bytes -> Int32 in
            guard let base = bytes.baseAddress, bytes.count > 0 else {
                // A NULL pointer would bind NULL; an empty blob is a zero-length zeroblob.
                return sqlite3_bind_zeroblob(handle, index, 0)
            }
            return sqlite3_bind_blob64(handle, index, base, sqlite3_uint64(bytes.count), thing_sqlite_transient())
        }
        try check(rc)
    }

    public func bindNull(at index: Int32) throws(SQLiteError) {
        try prepareToBind()
        try check(sqlite3_bind_null(handle, index))
    }

    /// nil binds NULL.
    public func bind(_ value: String?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// nil binds NULL.
    public func bind(_ value: Int64?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// nil binds NULL.
    public func bind(_ value: Int?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// nil binds NULL.
    public func bind(_ value: Double?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// nil binds NULL.
    public func bind(_ value: Bool?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// nil binds NULL.
    public func bind(_ value: [UInt8]?, at index: Int32) throws(SQLiteError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    // MARK: Execution

    /// Advances to the next row. Returns true when a row is available, false when done.
    ///
    /// On completion or error the statement is reset at once (bindings kept): an un-reset read
    /// statement would hold its read transaction open, and in WAL mode that stops checkpoints.
    public func step() throws(SQLiteError) -> Bool {
        let db = try connection.open(for: sql)
        let rc = sqlite3_step(handle)
        switch rc & 0xFF {
        case SQLITE_ROW:
            needsReset = true
            return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            needsReset = false
            return false
        default:
            let error = SQLiteError(rc: rc, db: db, sql: sql)
            sqlite3_reset(handle)
            needsReset = false
            throw error
        }
    }

    /// Steps to completion (discarding any rows) and leaves the statement reset with its bindings,
    /// ready to run again.
    public func run() throws(SQLiteError) {
        while try step() {}
    }

    /// Binds `values` (replacing all bindings) and runs.
    public func run(_ values: [SQLiteValue]) throws(SQLiteError) {
        try bind(values)
        try run()
    }

    /// Resets to the start and clears all bindings to NULL.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        needsReset = false
    }

    /// All rows from the start (a half-stepped statement is rewound first), copied out.
    public func rows() throws(SQLiteError) -> [Row] {
        if needsReset { rewind() }
        var rows: [Row] = []
        var names: [String]?
        while try step() {
            let columns = names ?? columnNames
            names = columns
            rows.append(Row(columns: columns, values: currentValues()))
        }
        return rows
    }

    /// Binds `values` (replacing all bindings) and returns all rows.
    public func rows(_ values: [SQLiteValue]) throws(SQLiteError) -> [Row] {
        try bind(values)
        return try rows()
    }

    // MARK: Columns of the current row

    public var columnCount: Int32 { sqlite3_column_count(handle) }

    public func columnName(_ i: Int32) -> String {
        guard let name = sqlite3_column_name(handle, i) else { return "" }
        return String(cString: name)
    }

    public var columnNames: [String] {
        (0..<columnCount).map(columnName)
    }

    public func isNull(_ i: Int32) -> Bool {
        sqlite3_column_type(handle, i) == SQLITE_NULL
    }

    /// SQLite's conversions apply: NULL reads as 0, text is parsed.
    public func int64(_ i: Int32) -> Int64 {
        sqlite3_column_int64(handle, i)
    }

    public func int(_ i: Int32) -> Int {
        Int(truncatingIfNeeded: sqlite3_column_int64(handle, i))
    }

    public func double(_ i: Int32) -> Double {
        sqlite3_column_double(handle, i)
    }

    public func bool(_ i: Int32) -> Bool {
        sqlite3_column_int64(handle, i) != 0
    }

    /// nil when NULL; numbers are converted to text by SQLite.
    public func string(_ i: Int32) -> String? {
        isNull(i) ? nil : text(i)
    }

    /// Reads a column's text as UTF-8 bytes without making a String (nil when NULL). The bytes are valid only inside
    /// `body`: for loops that copy many columns straight into their own storage.
    public func withText<R>(_ i: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws -> R) rethrows -> R {
        // sqlite3_column_text gives NULL for a NULL value (and "" for an empty text): no separate type check.
        guard let text = sqlite3_column_text(handle, i) else { return try body(nil) }
        return try body(UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, i))))
    }

    /// nil when NULL; an empty blob is `[]`.
    public func blob(_ i: Int32) -> [UInt8]? {
        isNull(i) ? nil : bytes(i)
    }

    /// The value in its stored type.
    public func value(_ i: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT: .text(text(i))
        case SQLITE_BLOB: .blob(bytes(i))
        default: .null
        }
    }

    func currentValues() -> [SQLiteValue] {
        (0..<columnCount).map(value)
    }

    // MARK: Private

    private func text(_ i: Int32) -> String {
        // Pointer first, then byte count: the order SQLite documents, since the pointer call may
        // convert the value. The count keeps embedded NULs.
        guard let text = sqlite3_column_text(handle, i) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, i))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    private func bytes(_ i: Int32) -> [UInt8] {
        let bytes = sqlite3_column_blob(handle, i)
        let count = Int(sqlite3_column_bytes(handle, i))
        // A zero-length blob comes back as a NULL pointer.
        guard let bytes, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// Back to the first row, keeping bindings.
    private func rewind() {
        sqlite3_reset(handle)
        needsReset = false
    }

    /// Binding to a statement whose connection is closed would touch a zombie connection.
    private func prepareToBind() throws(SQLiteError) {
        _ = try connection.open(for: sql)
        if needsReset { rewind() }
    }

    private func check(_ rc: Int32) throws(SQLiteError) {
        guard rc != SQLITE_OK else { return }
        throw SQLiteError(rc: rc, db: connection.handle, sql: sql)
    }
}

extension Statement: CustomStringConvertible {
    public var description: String { "Statement(\(sql))" }
}

// Declared so no other module can add a conformance: SQLite does no locking of its own here.
@available(*, unavailable)
extension Statement: Sendable {}
