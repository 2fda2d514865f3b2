import Foundation
import SQLite
import Testing

@Suite struct DatabaseTests {
    let dir: TemporaryDirectory
    init() throws { dir = try TemporaryDirectory() }

    @Test func createsFileAndAppliesPragmas() throws {
        let path = dir.file("agent.db")
        let db = try Database(path: path)
        #expect(db.path == path)
        #expect(FileManager.default.fileExists(atPath: path))
        #expect(try db.scalar("PRAGMA journal_mode") == .text("wal"))
        #expect(try db.scalar("PRAGMA synchronous") == .integer(1))  // NORMAL
        #expect(try db.scalar("PRAGMA foreign_keys") == .integer(1))
        #expect(try db.scalar("PRAGMA busy_timeout") == .integer(5000))
        #expect(try db.userVersion == 0)
        #expect(try db.integrityCheck() == ["ok"])
    }

    @Test func optionsAreApplied() throws {
        var options = Database.Options()
        options.journalModeWAL = false
        options.synchronous = .full
        options.foreignKeys = false
        options.busyTimeout = .milliseconds(1500)
        let db = try Database(path: dir.file("plain.db"), options: options)
        #expect(try db.scalar("PRAGMA journal_mode") == .text("delete"))
        #expect(try db.scalar("PRAGMA synchronous") == .integer(2))
        #expect(try db.scalar("PRAGMA foreign_keys") == .integer(0))
        #expect(try db.scalar("PRAGMA busy_timeout") == .integer(1500))
    }

    @Test func inMemoryDatabase() throws {
        let db = try Database(path: ":memory:")
        try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        #expect(try db.query("SELECT x FROM t") == [Row(columns: ["x"], values: [.integer(1)])])
        #expect(try db.scalar("PRAGMA journal_mode") == .text("memory"))
    }

    @Test func reopensExistingData() throws {
        let path = dir.file("reopen.db")
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(v TEXT); INSERT INTO t VALUES ('kept')")
        }
        let db = try Database(path: path)
        #expect(try db.scalar("SELECT v FROM t") == .text("kept"))
    }

    @Test func integrityCheckOnPopulatedDatabase() throws {
        let db = try Database(path: dir.file("integrity.db"))
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT UNIQUE)")
        try db.transaction {
            for i in 0..<500 { try db.run("INSERT INTO t(v) VALUES (?)", [.text("value \(i)")]) }
        }
        #expect(try db.integrityCheck() == ["ok"])
    }

    // MARK: Errors carry their context

    @Test func errorCarriesMessageAndSQL() throws {
        let db = try Database(path: dir.file("errors.db"))
        let error = #expect(throws: SQLiteError.self) { try db.query("SELECT * FROM missing_table") }
        #expect(error?.code == SQLiteError.error)
        #expect(error?.message == "no such table: missing_table")
        #expect(error?.sql == "SELECT * FROM missing_table")
        #expect(error?.path == nil)
        #expect(
            error?.description
                == "SQLite error 1 (SQL logic error): no such table: missing_table — in: SELECT * FROM missing_table")
    }

    @Test func executeNamesTheFailingStatementAndKeepsEarlierOnes() throws {
        let db = try Database(path: dir.file("execute.db"))
        let error = #expect(throws: SQLiteError.self) {
            try db.execute(
                """
                -- schema
                CREATE TABLE a(x);
                INSERT INTO a VALUES (1);
                INSERT INTO nowhere VALUES (2);
                CREATE TABLE b(y);
                """)
        }
        #expect(error?.message.contains("no such table: nowhere") == true)
        #expect(error?.sql == "INSERT INTO nowhere VALUES (2);")
        #expect(try db.scalar("SELECT count(*) FROM a") == .integer(1))
        #expect(try db.query("SELECT name FROM sqlite_master WHERE name = 'b'").isEmpty)
    }

    @Test func executeAcceptsCommentsAndBlankTail() throws {
        let db = try Database(path: dir.file("comments.db"))
        try db.execute("  CREATE TABLE t(x); /* trailing */ ;  -- done\n  ")
        try db.execute("")
        #expect(try db.scalar("SELECT count(*) FROM t") == .integer(0))
    }

    @Test func prepareRefusesSeveralStatementsAndEmptySQL() throws {
        let db = try Database(path: dir.file("prepare.db"))
        let several = #expect(throws: SQLiteError.self) { try db.prepare("SELECT 1; SELECT 2") }
        #expect(several?.code == SQLiteError.misuse)
        #expect(several?.message.contains("execute()") == true)
        let empty = #expect(throws: SQLiteError.self) { try db.prepare("  -- nothing") }
        #expect(empty?.code == SQLiteError.misuse)
        // A trailing semicolon and comment are fine.
        let one = try db.prepare("SELECT 1; -- the answer")
        #expect(try one.rows().map(\.values) == [[.integer(1)]])
    }

    @Test func constraintViolationsHaveConstraintCodes() throws {
        let db = try Database(path: dir.file("constraint.db"))
        try db.execute(
            """
            CREATE TABLE device(id TEXT PRIMARY KEY, name TEXT NOT NULL);
            CREATE TABLE property(device TEXT NOT NULL REFERENCES device(id), key TEXT);
            INSERT INTO device VALUES ('d1', 'lamp');
            """)
        let unique = #expect(throws: SQLiteError.self) {
            try db.run("INSERT INTO device VALUES (?, ?)", ["d1", "again"])
        }
        #expect(unique?.code == SQLiteError.constraint)
        #expect(unique?.extendedCode == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
        #expect(unique?.message == "UNIQUE constraint failed: device.id")
        #expect(unique?.sql == "INSERT INTO device VALUES (?, ?)")

        let notNull = #expect(throws: SQLiteError.self) {
            try db.run("INSERT INTO device VALUES (?, ?)", ["d2", .null])
        }
        #expect(notNull?.code == SQLiteError.constraint)
        #expect(notNull?.extendedCode == 1299)  // SQLITE_CONSTRAINT_NOTNULL

        let foreignKey = #expect(throws: SQLiteError.self) {
            try db.run("INSERT INTO property VALUES (?, ?)", ["ghost", "power"])
        }
        #expect(foreignKey?.code == SQLiteError.constraint)
        #expect(foreignKey?.extendedCode == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
        #expect(foreignKey?.description.contains("extended 787") == true)
    }

    // MARK: Opening what cannot be opened

    @Test func missingDirectoryIsCantOpenNamingThePath() throws {
        let path = dir.file("no/such/dir/agent.db")
        let error = #expect(throws: SQLiteError.self) { try Database(path: path) }
        #expect(error?.code == SQLiteError.cantOpen)
        #expect(error?.path == path)
        #expect(error?.message.contains("directory \(dir.path)/no/such/dir does not exist") == true)
        #expect(error?.description.contains(path) == true)
        #expect(!FileManager.default.fileExists(atPath: dir.file("no")))
    }

    @Test func missingFileWithoutCreateIsCantOpen() throws {
        var options = Database.Options()
        options.create = false
        let path = dir.file("absent.db")
        let error = #expect(throws: SQLiteError.self) { try Database(path: path, options: options) }
        #expect(error?.code == SQLiteError.cantOpen)
        #expect(error?.path == path)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    static let nonDatabases = [
        "a page of text": String(repeating: "this is a text file, not a database\n", count: 200),
        "a few bytes": "garbage",
        "a truncated header": "SQLite format 3",
    ]

    @Test(arguments: nonDatabases.keys.sorted())
    func nonDatabaseFileIsRefusedAtOpenAndLeftUntouched(content: String) throws {
        let path = dir.file("notes.txt")
        let text = try #require(Self.nonDatabases[content])
        try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        let before = contents(of: path)
        let error = #expect(throws: SQLiteError.self) { try Database(path: path) }
        #expect(error?.code == SQLiteError.notADatabase)
        #expect(error?.path == path)
        #expect(error?.sql == nil)
        #expect(error?.description == "SQLite error 26 (file is not a database): file is not a database — file: \(path)")
        #expect(contents(of: path) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func corruptHeaderIsRefusedAtOpenAndLeftUntouched() throws {
        let path = dir.file("corrupt.db")
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
            try db.checkpoint()
        }
        var bytes = try #require(contents(of: path))
        bytes.replaceSubrange(0..<16, with: Data(repeating: 0x42, count: 16))  // destroy the magic header
        try bytes.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: SQLiteError.self) { try Database(path: path) }
        #expect(error?.code == SQLiteError.notADatabase)
        #expect(contents(of: path) == bytes)
    }

    @Test func readOnlyOptionRefusesWrites() throws {
        let path = dir.file("ro.db")
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        }
        let before = contents(of: path)
        var options = Database.Options()
        options.readOnly = true
        let db = try Database(path: path, options: options)
        #expect(try db.scalar("SELECT x FROM t") == .integer(1))
        let error = #expect(throws: SQLiteError.self) { try db.run("INSERT INTO t VALUES (2)") }
        #expect(error?.code == SQLiteError.readOnly)
        #expect(error?.message.contains("readonly") == true)
        #expect(throws: SQLiteError.self) { try db.execute("CREATE TABLE u(y)") }
        #expect(contents(of: path) == before)
    }

    @Test(.enabled(if: TemporaryDirectory.canMakeUnwritable, "root without chattr ignores permissions"))
    func unwritableFileIsRefusedForWritingAndReadableReadOnly() throws {
        let path = dir.file("locked.db")
        do {
            let db = try Database(path: path)
            try db.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        }  // closing the last connection checkpoints and removes the WAL
        try #require(dir.makeUnwritable(path))
        let error = #expect(throws: SQLiteError.self) { try Database(path: path) }
        #expect(error?.code == SQLiteError.readOnly)
        #expect(error?.path == path)
        #expect(error?.description.contains(path) == true)

        var options = Database.Options()
        options.readOnly = true
        let db = try Database(path: path, options: options)
        #expect(try db.scalar("SELECT x FROM t") == .integer(1))
        #expect(throws: SQLiteError.self) { try db.run("INSERT INTO t VALUES (2)") }
    }

    @Test(.enabled(if: TemporaryDirectory.canMakeUnwritable, "root without chattr ignores permissions"))
    func unwritableDirectoryIsCantOpenNamingThePath() throws {
        let locked = dir.file("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false)
        try #require(dir.makeUnwritable(locked))
        let path = locked + "/agent.db"
        let error = #expect(throws: SQLiteError.self) { try Database(path: path) }
        #expect(error?.code == SQLiteError.cantOpen)
        #expect(error?.path == path)
        #expect(error?.message.contains("is not writable") == true)
    }

    // MARK: Lifecycle

    @Test func closeIsIdempotentAndStatementsThenThrow() throws {
        let db = try Database(path: dir.file("close.db"))
        try db.execute("CREATE TABLE t(x)")
        let insert = try db.prepare("INSERT INTO t VALUES (?)")
        let select = try db.prepare("SELECT x FROM t")
        try insert.bind(1, at: 1)
        try insert.run()
        #expect(try select.step())  // left mid-iteration on purpose
        db.close()
        db.close()
        #expect(!db.isOpen)
        let error = #expect(throws: SQLiteError.self) { try insert.run() }
        #expect(error?.code == SQLiteError.misuse)
        #expect(error?.message == "database is closed")
        #expect(throws: SQLiteError.self) { try insert.bind(2, at: 1) }
        #expect(throws: SQLiteError.self) { try db.run("INSERT INTO t VALUES (3)") }
        #expect(throws: SQLiteError.self) { try db.userVersion }
    }

    @Test func statementOutlivingItsDatabaseThrows() throws {
        var db: Database? = try Database(path: dir.file("outlive.db"))
        let statement = try #require(try db?.prepare("SELECT 1"))
        db = nil
        #expect(db == nil)
        let error = #expect(throws: SQLiteError.self) { try statement.step() }
        #expect(error?.code == SQLiteError.misuse)
    }

    @Test func changesAndLastInsertRowID() throws {
        let db = try Database(path: dir.file("changes.db"))
        try db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER)")
        try db.run("INSERT INTO t(v) VALUES (?)", [10])
        #expect(db.lastInsertRowID == 1)
        try db.run("INSERT INTO t(v) VALUES (?)", [20])
        #expect(db.lastInsertRowID == 2)
        #expect(db.changes == 1)
        try db.run("UPDATE t SET v = v + 1")
        #expect(db.changes == 2)
    }

    @Test func checkpointEmptiesTheWAL() throws {
        let path = dir.file("checkpoint.db")
        let db = try Database(path: path)
        try db.execute("CREATE TABLE t(x)")
        try db.transaction {
            for i in 0..<100 { try db.run("INSERT INTO t VALUES (?)", [.integer(Int64(i))]) }
        }
        #expect((fileSize(path + "-wal") ?? 0) > 0)
        try db.checkpoint()
        #expect(fileSize(path + "-wal") == 0)
        #expect(try db.scalar("SELECT count(*) FROM t") == .integer(100))
    }
}
