import SQLite
import Testing

struct Boom: Error, Equatable {}

@Suite struct TransactionTests {
    let dir: TemporaryDirectory
    let db: Database

    init() throws {
        dir = try TemporaryDirectory()
        db = try Database(path: dir.file("transactions.db"))
        try db.execute("CREATE TABLE t(v TEXT)")
    }

    private func values() throws -> [String] {
        try db.query("SELECT v FROM t ORDER BY rowid").compactMap { $0.string("v") }
    }

    @Test(arguments: [Database.TransactionKind.deferred, .immediate, .exclusive])
    func commitsAndReturnsTheBodyValue(kind: Database.TransactionKind) throws {
        let count = try db.transaction(kind) {
            #expect(db.isInTransaction)
            try db.run("INSERT INTO t VALUES (?)", ["a"])
            try db.run("INSERT INTO t VALUES (?)", ["b"])
            return try db.scalar("SELECT count(*) FROM t")
        }
        #expect(count == .integer(2))
        #expect(!db.isInTransaction)
        // Visible from another connection: really committed.
        let other = try Database(path: db.path)
        #expect(try other.scalar("SELECT count(*) FROM t") == .integer(2))
    }

    @Test func rollsBackAndRethrowsWhenTheBodyThrows() throws {
        try db.run("INSERT INTO t VALUES ('before')")
        #expect(throws: Boom()) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES ('inside')")
                throw Boom()
            }
        }
        #expect(!db.isInTransaction)
        #expect(try values() == ["before"])
        let other = try Database(path: db.path)
        #expect(try other.scalar("SELECT count(*) FROM t WHERE v = 'inside'") == .integer(0))
    }

    @Test func rollsBackWhenAStatementFails() throws {
        let error = #expect(throws: SQLiteError.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES ('inside')")
                try db.run("INSERT INTO nowhere VALUES (1)")
            }
        }
        #expect(error?.message.contains("no such table: nowhere") == true)
        #expect(try values().isEmpty)
    }

    @Test func nestedTransactionIsASavepoint() throws {
        try db.transaction {
            try db.run("INSERT INTO t VALUES ('outer 1')")
            // The inner failure undoes only the inner work.
            #expect(throws: Boom()) {
                try db.transaction {
                    try db.run("INSERT INTO t VALUES ('inner, rolled back')")
                    throw Boom()
                }
            }
            #expect(db.isInTransaction)
            try db.transaction {
                try db.run("INSERT INTO t VALUES ('inner, kept')")
            }
            try db.run("INSERT INTO t VALUES ('outer 2')")
        }
        #expect(try values() == ["outer 1", "inner, kept", "outer 2"])
    }

    @Test func outerRollbackUndoesReleasedSavepoints() throws {
        #expect(throws: Boom()) {
            try db.transaction {
                try db.transaction { try db.run("INSERT INTO t VALUES ('inner')") }
                throw Boom()
            }
        }
        #expect(try values().isEmpty)
    }

    @Test func transactionInsideSQLTransactionIsASavepoint() throws {
        try db.execute("BEGIN")
        #expect(throws: Boom()) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES ('x')")
                throw Boom()
            }
        }
        try db.run("INSERT INTO t VALUES ('y')")
        try db.execute("COMMIT")
        #expect(try values() == ["y"])
    }

    @Test func savepointOutsideATransactionCommits() throws {
        try db.savepoint { try db.run("INSERT INTO t VALUES ('s')") }
        #expect(!db.isInTransaction)
        #expect(try values() == ["s"])
    }
}
