import SQLite
import Testing

@Suite struct MigratorTests {
    let dir: TemporaryDirectory
    let db: Database

    init() throws {
        dir = try TemporaryDirectory()
        db = try Database(path: dir.file("migrations.db"))
    }

    static let all: [Migration] = [
        Migration(version: 1, name: "devices", sql: "CREATE TABLE device(id TEXT PRIMARY KEY, name TEXT)"),
        Migration(
            version: 2, name: "properties",
            sql: """
                CREATE TABLE property(device TEXT NOT NULL REFERENCES device(id), key TEXT NOT NULL, value);
                CREATE INDEX property_device ON property(device);
                """),
        Migration(version: 3, name: "default device") { db in
            try db.run("INSERT INTO device VALUES (?, ?)", ["gateway", "Gateway"])
        },
    ]

    private func tables() throws -> [String] {
        try db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap {
            $0.string("name")
        }
    }

    @Test func freshDatabaseMigratesToLatest() throws {
        let migrator = Migrator(Self.all)
        #expect(migrator.latestVersion == 3)
        let result = try migrator.migrate(db)
        #expect(result.from == 0 && result.to == 3)
        #expect(try db.userVersion == 3)
        #expect(try tables() == ["device", "property"])
        #expect(try db.scalar("SELECT name FROM device") == .text("Gateway"))
    }

    @Test func olderDatabaseMigratesIncrementally() throws {
        #expect(try Migrator(Array(Self.all.prefix(1))).migrate(db) == (0, 1))
        try db.run("INSERT INTO device VALUES ('d1', 'lamp')")
        let result = try Migrator(Self.all).migrate(db)
        #expect(result.from == 1 && result.to == 3)
        #expect(try db.scalar("SELECT count(*) FROM device") == .integer(2))
    }

    @Test func rerunIsANoOp() throws {
        try Migrator(Self.all).migrate(db)
        let again = try Migrator(Self.all).migrate(db)
        #expect(again.from == 3 && again.to == 3)
        #expect(try db.scalar("SELECT count(*) FROM device") == .integer(1))  // the closure did not run twice
    }

    @Test func failingMigrationRollsBackAndKeepsVersion() throws {
        try Migrator(Array(Self.all.prefix(1))).migrate(db)
        let broken = Migration(
            version: 2, name: "broken",
            sql: """
                CREATE TABLE half(x);
                INSERT INTO device VALUES ('d9', 'partial');
                INSERT INTO no_such_table VALUES (1);
                """)
        let later = Migration(version: 3, name: "never reached", sql: "CREATE TABLE later(x)")
        let error = #expect(throws: MigrationError.self) { try Migrator([Self.all[0], broken, later]).migrate(db) }
        guard case .failed(let version, let name, let underlying) = error else {
            Issue.record("expected .failed, got \(String(describing: error))")
            return
        }
        #expect(version == 2 && name == "broken")
        #expect((underlying as? SQLiteError)?.message == "no such table: no_such_table")
        #expect(error?.description.contains("migration 2 (broken) failed") == true)
        #expect(try db.userVersion == 1)
        #expect(try tables() == ["device"])
        #expect(try db.scalar("SELECT count(*) FROM device") == .integer(0))
        #expect(!db.isInTransaction)
        // The fixed list then applies cleanly.
        #expect(try Migrator(Self.all).migrate(db) == (1, 3))
    }

    @Test func failureInALaterStepKeepsEarlierSteps() throws {
        let failing = Migration(version: 2, name: "throws") { _ in throw Boom() }
        let error = #expect(throws: MigrationError.self) { try Migrator([Self.all[0], failing]).migrate(db) }
        guard case .failed(2, "throws", let underlying) = error else {
            Issue.record("expected .failed, got \(String(describing: error))")
            return
        }
        #expect(underlying is Boom)
        #expect(try db.userVersion == 1)
        #expect(try tables() == ["device"])
    }

    @Test func downgradeIsRefused() throws {
        try db.execute("PRAGMA user_version = 7")
        let error = #expect(throws: MigrationError.self) { try Migrator(Self.all).migrate(db) }
        guard case .databaseIsNewer(7, 3) = error else {
            Issue.record("expected .databaseIsNewer(7, 3), got \(String(describing: error))")
            return
        }
        #expect(error?.description.contains("refusing to downgrade") == true)
        #expect(try db.userVersion == 7)
        #expect(try tables().isEmpty)
    }

    @Test(arguments: [[2, 1], [1, 1], [0, 1], [-1]])
    func badlyOrderedVersionsAreRefusedBeforeAnythingRuns(versions: [Int]) throws {
        let migrations = versions.map { Migration(version: $0, name: "m\($0)", sql: "CREATE TABLE m\($0 < 0 ? 0 : $0)(x)") }
        let error = #expect(throws: MigrationError.self) { try Migrator(migrations).migrate(db) }
        guard case .invalidVersionOrder = error else {
            Issue.record("expected .invalidVersionOrder, got \(String(describing: error))")
            return
        }
        #expect(try tables().isEmpty)
        #expect(try db.userVersion == 0)
    }
}

