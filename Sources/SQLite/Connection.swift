internal import CSQLite

/// The raw connection, shared by a `Database` and the statements it prepared.
///
/// Statements keep this object (not the `Database`) so the database's internal statement cache
/// forms no reference cycle, and so a statement that outlives `close()` can tell the connection is
/// gone and throw instead of touching it. Closing uses `sqlite3_close_v2`, which leaves a "zombie"
/// until the last statement is finalized, so a statement's `deinit` can always finalize safely.
final class Connection {
    /// nil once closed.
    private(set) var handle: OpaquePointer?
    let path: String

    init(handle: OpaquePointer, path: String) {
        self.handle = handle
        self.path = path
    }

    /// The handle, or a misuse error naming the statement when the connection is closed.
    func open(for sql: String?) throws(SQLiteError) -> OpaquePointer {
        guard let handle else {
            throw SQLiteError(code: SQLiteError.misuse, message: "database is closed", sql: sql, path: path)
        }
        return handle
    }

    func close() {
        guard let db = handle else { return }
        handle = nil
        // Statements callers still hold may be mid-iteration; resetting them ends their read
        // transactions now instead of whenever they are released.
        var stmt = sqlite3_next_stmt(db, nil)
        while let s = stmt {
            sqlite3_reset(s)
            stmt = sqlite3_next_stmt(db, s)
        }
        // A transaction left open would otherwise keep the write lock for as long as the zombie lives.
        if sqlite3_get_autocommit(db) == 0 {
            sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
        }
        sqlite3_close_v2(db)
    }

    deinit { close() }
}
