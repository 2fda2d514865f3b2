internal import CSQLite

/// An error reported by SQLite, with the context needed to act on it without a debugger:
/// the result codes to match on, SQLite's own message, and the SQL or file involved.
///
///     catch let e as SQLiteError where e.code == SQLiteError.busy { ... }
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// Primary result code (`extendedCode & 0xFF`); compare with the static constants below.
    public let code: Int32
    /// Extended result code, e.g. 2067 (SQLITE_CONSTRAINT_UNIQUE); equal to `code` when SQLite gave none.
    public let extendedCode: Int32
    /// SQLite's message (`sqlite3_errmsg`), or this module's own when the error is raised here.
    public let message: String
    /// The statement involved, if any.
    public let sql: String?
    /// The database file, for errors raised while opening it.
    public let path: String?

    public init(code: Int32, extendedCode: Int32? = nil, message: String, sql: String? = nil, path: String? = nil) {
        self.code = code & 0xFF
        self.extendedCode = extendedCode ?? code
        self.message = message
        self.sql = sql
        self.path = path
    }

    /// Builds the error for result code `rc` from the connection's error state.
    ///
    /// The connection's message is only used when its error code matches `rc`: some failures (a
    /// statement used after close, a binding count mismatch) never reach the connection, and then
    /// its message would describe an older, unrelated error.
    init(rc: Int32, db: OpaquePointer?, sql: String? = nil, path: String? = nil) {
        var extended = rc
        var message = String(cString: sqlite3_errstr(rc))
        if let db {
            let dbExtended = sqlite3_extended_errcode(db)
            if dbExtended & 0xFF == rc & 0xFF {
                // rc is already extended when the connection was opened with SQLITE_OPEN_EXRESCODE.
                extended = rc > 0xFF ? rc : dbExtended
                message = String(cString: sqlite3_errmsg(db))
            }
        }
        self.init(code: rc, extendedCode: extended, message: message, sql: sql, path: path)
    }

    /// SQLite's generic text for the primary code, e.g. "SQL logic error".
    public var codeDescription: String {
        String(cString: sqlite3_errstr(code))
    }

    public var description: String {
        var text = "SQLite error \(code) (\(codeDescription)"
        if extendedCode != code { text += ", extended \(extendedCode)" }
        text += "): \(message)"
        if let sql { text += " — in: \(sql)" }
        if let path { text += " — file: \(path)" }
        return text
    }

    // Primary result codes callers are expected to match on.
    public static let error: Int32 = SQLITE_ERROR
    public static let perm: Int32 = SQLITE_PERM
    public static let abort: Int32 = SQLITE_ABORT
    public static let busy: Int32 = SQLITE_BUSY
    public static let locked: Int32 = SQLITE_LOCKED
    public static let noMem: Int32 = SQLITE_NOMEM
    public static let readOnly: Int32 = SQLITE_READONLY
    public static let interrupt: Int32 = SQLITE_INTERRUPT
    public static let ioErr: Int32 = SQLITE_IOERR
    public static let corrupt: Int32 = SQLITE_CORRUPT
    public static let full: Int32 = SQLITE_FULL
    public static let cantOpen: Int32 = SQLITE_CANTOPEN
    public static let schema: Int32 = SQLITE_SCHEMA
    public static let tooBig: Int32 = SQLITE_TOOBIG
    public static let constraint: Int32 = SQLITE_CONSTRAINT
    public static let mismatch: Int32 = SQLITE_MISMATCH
    public static let misuse: Int32 = SQLITE_MISUSE
    public static let range: Int32 = SQLITE_RANGE
    public static let notADatabase: Int32 = SQLITE_NOTADB
}
