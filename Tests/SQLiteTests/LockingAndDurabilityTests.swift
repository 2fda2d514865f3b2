import Foundation
import SQLite
import Synchronization
import Testing

@Suite struct LockingAndDurabilityTests {
    let dir: TemporaryDirectory
    init() throws { dir = try TemporaryDirectory() }

    @Test(.timeLimit(.minutes(1)))
    func writerWaitsForTheBusyTimeoutThenFailsWithBusy() throws {
        let path = dir.file("busy.db")
        let holder = try Database(path: path)
        try holder.execute("CREATE TABLE t(x)")
        var options = Database.Options()
        options.busyTimeout = .milliseconds(300)
        let waiter = try Database(path: path, options: options)

        try holder.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES ('holder')")
        let clock = ContinuousClock()
        let start = clock.now
        let error = #expect(throws: SQLiteError.self) { try waiter.run("INSERT INTO t VALUES ('waiter')") }
        let waited = clock.now - start
        #expect(error?.code == SQLiteError.busy)
        #expect(error?.message == "database is locked")
        // A correctness check that it waited rather than failing at once (not a performance bound).
        #expect(waited >= .milliseconds(250))
        // Readers are not blocked by the writer in WAL mode.
        #expect(try waiter.scalar("SELECT count(*) FROM t") == .integer(0))

        try holder.execute("COMMIT")
        try waiter.run("INSERT INTO t VALUES ('waiter')")
        #expect(try holder.scalar("SELECT count(*) FROM t") == .integer(2))
    }

    /// The intended sharing pattern: an owner that serializes access with a Mutex.
    final class Owner: Sendable {
        let database: Mutex<Database>
        init(_ database: sending Database) { self.database = Mutex(database) }
    }

    @Test func sharedBehindAMutexAcrossTasks() async throws {
        let owner = Owner(try Database(path: dir.file("shared.db"), options: .init(busyTimeout: .seconds(1))))
        try owner.database.withLock { db in try db.execute("CREATE TABLE t(task INTEGER, i INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for i in 0..<50 {
                        try owner.database.withLock { db in
                            try db.transaction {
                                try db.run("INSERT INTO t VALUES (?, ?)", [.integer(Int64(task)), .integer(Int64(i))])
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try owner.database.withLock { db in try db.scalar("SELECT count(*) FROM t") } == .integer(400))
    }

    @Test(.timeLimit(.minutes(1)))
    func immediateTransactionWaitsForTheBusyTimeout() throws {
        let path = dir.file("busy-tx.db")
        let holder = try Database(path: path)
        var options = Database.Options()
        options.busyTimeout = .milliseconds(100)
        let waiter = try Database(path: path, options: options)
        try holder.execute("BEGIN IMMEDIATE")
        let error = #expect(throws: SQLiteError.self) { try waiter.transaction { } }
        #expect(error?.code == SQLiteError.busy)
        #expect(!waiter.isInTransaction)
        try holder.execute("ROLLBACK")
        try waiter.transaction { }
    }

    /// A commit made with synchronous=NORMAL in WAL mode survives the writer being SIGKILLed before
    /// any checkpoint: the row is only in the -wal file, and a fresh open recovers it.
    /// The writer is the sqlite3 shell, the one SQLite process a test can spawn and kill cleanly.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "needs the sqlite3 shell"),
        .timeLimit(.minutes(1)))
    func commitSurvivesSIGKILLOfTheWriter() throws {
        let path = dir.file("durable.db")
        do {
            let db = try Database(path: path)  // WAL mode is persistent in the file
            try db.execute("CREATE TABLE report(device TEXT, value INTEGER)")
        }

        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        writer.arguments = [path]
        let input = Pipe()
        writer.standardInput = input
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        defer {
            if writer.isRunning { kill(writer.processIdentifier, SIGKILL) }
            try? input.fileHandleForWriting.close()
        }
        input.fileHandleForWriting.write(
            Data(
                """
                PRAGMA synchronous = NORMAL;
                BEGIN; INSERT INTO report VALUES ('lamp-1', 42); INSERT INTO report VALUES ('lamp-2', 7); COMMIT;

                """.utf8))

        // Poll with short-lived read-only connections: they neither checkpoint nor hold locks.
        var options = Database.Options()
        options.readOnly = true
        var committed = false
        for _ in 0..<500 where !committed {
            let probe = try Database(path: path, options: options)
            committed = try probe.scalar("SELECT count(*) FROM report") == .integer(2)
            if !committed { usleep(10_000) }
        }
        try #require(committed)
        #expect(writer.isRunning)  // still holding its connection open

        kill(writer.processIdentifier, SIGKILL)
        writer.waitUntilExit()
        #expect(writer.terminationReason == .uncaughtSignal)
        #expect((fileSize(path + "-wal") ?? 0) > 0)  // the rows were never checkpointed

        let db = try Database(path: path)
        let rows = try db.query("SELECT device, value FROM report ORDER BY device")
        #expect(rows.map(\.values) == [[.text("lamp-1"), .integer(42)], [.text("lamp-2"), .integer(7)]])
        #expect(try db.integrityCheck() == ["ok"])
    }
}
