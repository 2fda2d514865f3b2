internal import CSQLite

#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#elseif canImport(Darwin)
internal import Darwin
#endif

/// One SQLite connection.
///
/// Not Sendable, and opened with SQLITE_OPEN_NOMUTEX: SQLite does no locking of its own, so the
/// owner must serialize all use of the database and its statements (e.g. keep it in a `Mutex`,
/// or confine it to one thread). Closes in deinit.
public final class Database {
    public enum Synchronous: Sendable {
        /// No fsync: a power loss can corrupt the database. A killed process loses nothing committed.
        case off
        /// In WAL mode: a killed process loses nothing committed; a power loss may lose the last
        /// commits but never corrupts. The right trade for a cache written on every message.
        case normal
        /// fsync on every commit: durable across power loss, at a cost per commit.
        case full
    }

    public struct Options: Sendable {
        public typealias Synchronous = Database.Synchronous

        /// Open with SQLITE_OPEN_READONLY: every write fails with `SQLiteError.readOnly`.
        public var readOnly = false
        /// Create the file when missing. The directory is never created.
        public var create = true
        /// Switch the file to WAL (readers and one writer run concurrently; commits are cheap).
        /// When false the file keeps whatever journal mode it has. Ignored when `readOnly`.
        public var journalModeWAL = true
        public var synchronous: Synchronous = .normal
        /// How long a statement waits for another connection's lock before failing with `busy`.
        public var busyTimeout: Duration = .seconds(5)
        /// SQLite leaves foreign keys off by default, per connection; this turns them on.
        public var foreignKeys = true

        public init() {}

        public init(
            readOnly: Bool = false, create: Bool = true, journalModeWAL: Bool = true,
            synchronous: Synchronous = .normal, busyTimeout: Duration = .seconds(5), foreignKeys: Bool = true
        ) {
            self.readOnly = readOnly
            self.create = create
            self.journalModeWAL = journalModeWAL
            self.synchronous = synchronous
            self.busyTimeout = busyTimeout
            self.foreignKeys = foreignKeys
        }
    }

    public enum TransactionKind: Sendable {
        /// Takes locks on first read/write; a later write can fail with `busy` without waiting.
        case deferred
        /// Takes the write lock at BEGIN (waiting up to the busy timeout): the usual choice for writers.
        case immediate
        /// Like immediate in WAL mode; in other modes also keeps readers out.
        case exclusive

        var beginSQL: String {
            switch self {
            case .deferred: "BEGIN DEFERRED"
            case .immediate: "BEGIN IMMEDIATE"
            case .exclusive: "BEGIN EXCLUSIVE"
            }
        }
    }

    public let path: String
    public let options: Options
    let connection: Connection
    /// Statements behind `run`/`query`/`scalar`, so repeated SQL is compiled once. Bounded; cleared
    /// wholesale when full, since SQL built by string interpolation would otherwise grow it forever.
    private var cache: [String: Statement] = [:]
    private static let cacheLimit = 64
    private static let savepointName = "thing_savepoint"

    /// Opens (or creates) the database and proves it is one.
    ///
    /// The first page is read here, so a corrupt or non-database file fails now with `notADatabase`
    /// (and is left untouched) rather than at some later write. A missing directory or an
    /// unwritable file fails with `cantOpen` / `readOnly` and an error naming the path.
    public init(path: String, options: Options = .init()) throws(SQLiteError) {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if options.readOnly {
            flags |= SQLITE_OPEN_READONLY
        } else {
            flags |= SQLITE_OPEN_READWRITE
            if options.create { flags |= SQLITE_OPEN_CREATE }
        }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let error = Self.openError(rc: rc, db: handle, path: path, options: options)
            // sqlite3_open_v2 allocates a handle even on failure; it must still be closed.
            sqlite3_close_v2(handle)
            throw error
        }
        self.path = path
        self.options = options
        self.connection = Connection(handle: handle, path: path)
        do throws(SQLiteError) {
            try configure(handle)
        } catch {
            close()
            throw error.with(path: path)
        }
    }

    deinit {
        close()
    }

    private func configure(_ db: OpaquePointer) throws(SQLiteError) {
        sqlite3_busy_timeout(db, Self.milliseconds(options.busyTimeout))
        // sqlite3_open_v2 silently falls back to read-only when the file is not writable; a
        // writer should learn that now, not at its first write.
        if !options.readOnly && sqlite3_db_readonly(db, "main") == 1 {
            throw SQLiteError(
                code: SQLiteError.readOnly,
                message: "database file is not writable (open it with Options.readOnly to read it)",
                path: path)
        }
        // Opening never reads the file; this does, before anything could write to it. The probe's
        // SQL is left out of the error: it would only distract from the file named in it.
        do throws(SQLiteError) {
            _ = try scalar("SELECT count(*) FROM sqlite_master")
        } catch {
            throw SQLiteError(code: error.code, extendedCode: error.extendedCode, message: error.message, path: path)
        }
        if !options.readOnly && options.journalModeWAL {
            try execute("PRAGMA journal_mode = WAL")
        }
        let synchronous =
            switch options.synchronous {
            case .off: "OFF"
            case .normal: "NORMAL"
            case .full: "FULL"
            }
        try execute("PRAGMA synchronous = \(synchronous)")
        try execute("PRAGMA foreign_keys = \(options.foreignKeys ? "ON" : "OFF")")
    }

    /// Closes the connection. Idempotent. Statements still held elsewhere are reset and will throw
    /// `misuse` ("database is closed") when used; their memory is freed when they are released.
    public func close() {
        cache.removeAll()
        connection.close()
    }

    public var isOpen: Bool { connection.handle != nil }

    /// Makes the close of this connection leave the WAL alone: no checkpoint, and so `-wal` and `-shm` are not
    /// removed by name (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE). For a connection to a file that was deleted or replaced
    /// under it, whose path may lead to another database's WAL by the time it closes.
    public func leaveWALOnClose() throws(SQLiteError) {
        let db = try connection.open(for: nil)
        let rc = thing_sqlite_no_checkpoint_on_close(db)
        if rc != SQLITE_OK { throw SQLiteError(rc: rc, db: db, path: path) }
    }

    /// True between BEGIN and COMMIT/ROLLBACK.
    public var isInTransaction: Bool {
        guard let db = connection.handle else { return false }
        return sqlite3_get_autocommit(db) == 0
    }

    // MARK: Statements

    /// Runs one or more `;`-separated statements, discarding any rows. No bindings; an error names
    /// the statement that failed, and the statements before it stay applied.
    public func execute(_ sql: String) throws(SQLiteError) {
        let db = try connection.open(for: sql)
        let failure: SQLiteError? = sql.withCString { start in
            var cursor = start
            while cursor.pointee != 0 {
                var stmt: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let rc = sqlite3_prepare_v3(db, cursor, -1, 0, &stmt, &tail)
                // The statement's text only for an error: trimming it (Unicode whitespace, generic slices) on every
                // success was a tenth of a short `info`'s own time.
                guard rc == SQLITE_OK else {
                    return SQLiteError(rc: rc, db: db, sql: Self.text(from: cursor, to: tail))
                }
                defer { sqlite3_finalize(stmt) }
                if let stmt {  // nil for only whitespace or a comment
                    var step = sqlite3_step(stmt)
                    while step & 0xFF == SQLITE_ROW { step = sqlite3_step(stmt) }
                    if step & 0xFF != SQLITE_DONE {
                        return SQLiteError(rc: step, db: db, sql: Self.text(from: cursor, to: tail))
                    }
                }
                guard let tail, tail != cursor else { break }
                cursor = tail
            }
            return nil
        }
        if let failure { throw failure }
    }

    /// Compiles one statement for repeated use (SQLITE_PREPARE_PERSISTENT). Several statements in
    /// one string are refused with `misuse` rather than silently ignoring all but the first.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        let db = try connection.open(for: sql)
        var stmt: OpaquePointer?
        let failure: SQLiteError? = sql.withCString { start in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(db, start, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, &tail)
            guard rc == SQLITE_OK else { return SQLiteError(rc: rc, db: db, sql: sql) }
            guard stmt != nil else {
                return SQLiteError(code: SQLiteError.misuse, message: "no SQL statement (empty or only comments)", sql: sql)
            }
            if let tail, Self.holdsStatement(db, tail) {
                sqlite3_finalize(stmt)
                stmt = nil
                return SQLiteError(
                    code: SQLiteError.misuse,
                    message: "prepare() takes a single statement; use execute() for several", sql: sql)
            }
            return nil
        }
        if let failure { throw failure }
        guard let stmt else { throw SQLiteError(code: SQLiteError.misuse, message: "no statement", sql: sql) }
        return Statement(connection: connection, handle: stmt, sql: sql)
    }

    /// Prepares (cached), binds `bindings` (exactly one per parameter) and runs to completion.
    public func run(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) {
        let statement = try cachedStatement(sql)
        // Clearing the bindings drops the copies of bound text and blobs the cache would keep.
        defer { statement.reset() }
        try statement.bind(bindings)
        try statement.run()
    }

    public func query(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> [Row] {
        let statement = try cachedStatement(sql)
        defer { statement.reset() }
        try statement.bind(bindings)
        return try statement.rows()
    }

    /// The first column of the first row; nil when there is no row (`.null` when the value is NULL).
    public func scalar(_ sql: String, _ bindings: [SQLiteValue] = []) throws(SQLiteError) -> SQLiteValue? {
        let statement = try cachedStatement(sql)
        // The reset also ends the read transaction a half-stepped statement would hold.
        defer { statement.reset() }
        try statement.bind(bindings)
        guard try statement.step() else { return nil }
        return statement.value(0)
    }

    private func cachedStatement(_ sql: String) throws(SQLiteError) -> Statement {
        if let statement = cache[sql] { return statement }
        let statement = try prepare(sql)
        if cache.count >= Self.cacheLimit { cache.removeAll(keepingCapacity: true) }
        cache[sql] = statement
        return statement
    }

    // MARK: Transactions

    /// Runs `body` in a transaction: commits when it returns, rolls back and rethrows when it throws
    /// (or when COMMIT fails).
    ///
    /// Nested calls (inside another transaction, including one begun by SQL) become savepoints: an
    /// inner failure rolls back only the inner work, and the outer transaction can go on.
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        if isInTransaction { return try savepoint(body) }
        try run(kind.beginSQL)
        let value: T
        do {
            value = try body()
            try run("COMMIT")
        } catch let error as SQLiteError where error.path == nil {
            rollbackIfActive()
            // "database or disk is full — in: COMMIT" alone does not say which file is full.
            throw error.with(path: path)
        } catch {
            rollbackIfActive()
            throw error
        }
        return value
    }

    /// Runs `body` inside a SAVEPOINT: released when it returns, rolled back to and released when it
    /// throws. Outside a transaction this is a deferred transaction of its own.
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        let name = Self.savepointName
        try run("SAVEPOINT \(name)")
        let value: T
        do {
            value = try body()
            try run("RELEASE \(name)")
        } catch {
            // Some errors (SQLITE_FULL, IOERR, NOMEM) roll back the whole transaction themselves;
            // then there is no savepoint left to return to.
            if isInTransaction { try? execute("ROLLBACK TO \(name); RELEASE \(name)") }
            throw error
        }
        return value
    }

    private func rollbackIfActive() {
        if isInTransaction { try? run("ROLLBACK") }
    }

    // MARK: State

    /// Rows changed by the most recent INSERT, UPDATE or DELETE.
    public var changes: Int {
        guard let db = connection.handle else { return 0 }
        return Int(sqlite3_changes64(db))
    }

    public var lastInsertRowID: Int64 {
        guard let db = connection.handle else { return 0 }
        return sqlite3_last_insert_rowid(db)
    }

    /// PRAGMA user_version: the schema version the `Migrator` keeps.
    public var userVersion: Int {
        get throws(SQLiteError) {
            guard case .integer(let v) = try scalar("PRAGMA user_version") else { return 0 }
            return Int(v)
        }
    }

    func setUserVersion(_ version: Int) throws(SQLiteError) {
        // PRAGMA takes no bound parameters; an Int cannot inject anything.
        try execute("PRAGMA user_version = \(version)")
    }

    /// Copies the WAL into the database and truncates it (wal_checkpoint(TRUNCATE)).
    /// Throws `busy` when readers or a writer kept it from completing.
    public func checkpoint() throws(SQLiteError) {
        let db = try connection.open(for: nil)
        let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
        guard rc == SQLITE_OK else { throw SQLiteError(rc: rc, db: db, sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// PRAGMA integrity_check: `["ok"]` when the file is sound, otherwise one line per problem.
    public func integrityCheck() throws(SQLiteError) -> [String] {
        try query("PRAGMA integrity_check").map { row in
            if case .text(let line) = row[0] { return line }
            return row[0].description
        }
    }

    // MARK: Helpers

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        let ms = seconds.multipliedReportingOverflow(by: 1000)
        guard !ms.overflow else { return seconds < 0 ? 0 : Int32.max }
        let total = ms.partialValue + attoseconds / 1_000_000_000_000_000
        return Int32(clamping: max(0, total))
    }

    /// The SQL between two positions of one C string, trimmed, for error messages.
    private static func text(from start: UnsafePointer<CChar>, to end: UnsafePointer<CChar>?) -> String {
        let count = end.map { $0 - start } ?? strlen(start)
        let bytes = UnsafeRawBufferPointer(start: start, count: count)
        let text = String(decoding: bytes, as: UTF8.self)
        return String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    /// Whether the SQL after a prepared statement holds another statement (not just space, `;` or comments).
    private static func holdsStatement(_ db: OpaquePointer, _ tail: UnsafePointer<CChar>) -> Bool {
        var cursor = tail
        while cursor.pointee != 0 && (UInt8(bitPattern: cursor.pointee) <= 32 || cursor.pointee == 59) {  // ";"
            cursor += 1
        }
        guard cursor.pointee != 0 else { return false }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, cursor, -1, 0, &stmt, nil)
        defer { sqlite3_finalize(stmt) }
        // Unparsable text is still more SQL the caller expected to run.
        return rc != SQLITE_OK || stmt != nil
    }

    /// An open failure, made specific: SQLite only says "unable to open database file".
    private static func openError(rc: Int32, db: OpaquePointer?, path: String, options: Options) -> SQLiteError {
        var error = SQLiteError(rc: rc, db: db, path: path)
        guard error.code == SQLiteError.cantOpen, path != ":memory:", !path.isEmpty else { return error }
        let directory = Self.directory(of: path)
        var reason: String?
        if access(directory, F_OK) != 0 {
            reason = "directory \(directory) does not exist"
        } else if access(path, F_OK) != 0 {
            if options.readOnly || !options.create {
                reason = "file does not exist and Options.create is off or readOnly is set"
            } else if access(directory, W_OK) != 0 {
                reason = "directory \(directory) is not writable"
            }
        } else if access(path, R_OK) != 0 {
            reason = "file is not readable"
        }
        if let reason {
            error = SQLiteError(code: error.code, extendedCode: error.extendedCode,
                                message: "\(error.message): \(reason)", path: path)
        }
        return error
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}

// Declared so no other module can add a conformance: the connection is opened with
// SQLITE_OPEN_NOMUTEX and must be serialized by its owner.
@available(*, unavailable)
extension Database: Sendable {}

extension SQLiteError {
    /// The same error, naming the database file.
    func with(path: String) -> SQLiteError {
        SQLiteError(code: code, extendedCode: extendedCode, message: message, sql: sql, path: path)
    }
}
