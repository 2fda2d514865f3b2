import SQLite
import Testing

@Suite struct StatementTests {
    let dir: TemporaryDirectory
    let db: Database

    init() throws {
        dir = try TemporaryDirectory()
        db = try Database(path: dir.file("statements.db"))
        // No declared types: no affinity, so every value comes back in the class it was stored as.
        try db.execute("CREATE TABLE v(id INTEGER PRIMARY KEY, a, b, c)")
    }

    static let unicode = "héllo wörld — 日本語 🌍👩‍👩‍👧 \u{1F600}"
    static let withNUL = "before\u{0}after"
    static let zeroBlob: [UInt8] = [0, 0, 0, 1, 0, 255, 0]

    @Test func typedBindingsRoundTrip() throws {
        let insert = try db.prepare("INSERT INTO v(a, b, c) VALUES (?, ?, ?)")
        func row(_ fill: (Statement) throws -> Void) throws -> Int64 {
            try fill(insert)
            try insert.run()
            return db.lastInsertRowID
        }
        let ints = try row { s in
            try s.bind(Int64.min, at: 1); try s.bind(Int64.max, at: 2); try s.bind(-1 as Int, at: 3)
        }
        let doubles = try row { s in
            try s.bind(Double.pi, at: 1); try s.bind(-1.5e300, at: 2); try s.bind(Double.leastNonzeroMagnitude, at: 3)
        }
        let texts = try row { s in
            try s.bind(Self.unicode, at: 1); try s.bind("", at: 2); try s.bind(Self.withNUL, at: 3)
        }
        let blobs = try row { s in
            try s.bind(Self.zeroBlob, at: 1); try s.bind([UInt8](), at: 2); try s.bind([UInt8](repeating: 0xAB, count: 100_000), at: 3)
        }
        let nulls = try row { s in
            try s.bindNull(at: 1); try s.bind(nil as String?, at: 2); try s.bind(nil as Int64?, at: 3)
        }
        let optionals = try row { s in
            try s.bind("x" as String?, at: 1); try s.bind(7 as Int64?, at: 2); try s.bind(nil as Double?, at: 3)
        }
        let bools = try row { s in
            try s.bind(true, at: 1); try s.bind(false, at: 2); try s.bind(2.5 as Double?, at: 3)
        }

        let select = try db.prepare("SELECT a, b, c FROM v WHERE id = ?")
        func read(_ id: Int64) throws -> Statement {
            try select.bind(id, at: 1)
            #expect(try select.step())
            return select
        }

        var s = try read(ints)
        #expect(s.int64(0) == Int64.min && s.int64(1) == Int64.max && s.int(2) == -1)
        #expect(s.value(0) == .integer(.min) && s.value(1) == .integer(.max))

        s = try read(doubles)
        #expect(s.double(0) == Double.pi && s.double(1) == -1.5e300 && s.double(2) == Double.leastNonzeroMagnitude)
        #expect(s.value(0) == .real(.pi))

        s = try read(texts)
        #expect(s.string(0) == Self.unicode)
        #expect(s.string(1) == "")
        #expect(s.value(1) == .text(""))  // empty text, not NULL
        #expect(s.string(2) == Self.withNUL)
        #expect(s.string(2)?.utf8.count == 12)

        s = try read(blobs)
        #expect(s.blob(0) == Self.zeroBlob)
        #expect(s.blob(1) == [])
        #expect(s.value(1) == .blob([]))  // empty blob, not NULL
        #expect(s.blob(2)?.count == 100_000)

        s = try read(nulls)
        for i in Int32(0)..<3 {
            #expect(s.isNull(i))
            #expect(s.value(i) == .null)
            #expect(s.string(i) == nil)
            #expect(s.blob(i) == nil)
        }

        s = try read(optionals)
        #expect(s.value(0) == .text("x") && s.value(1) == .integer(7) && s.value(2) == .null)

        s = try read(bools)
        #expect(s.bool(0) && !s.bool(1) && s.double(2) == 2.5)
        #expect(s.value(0) == .integer(1) && s.value(1) == .integer(0))
        #expect(try !s.step())
    }

    @Test func valueArraysRoundTripThroughRows() throws {
        let values: [[SQLiteValue]] = [
            [.integer(.min), .integer(.max), .integer(0)],
            [.real(-0.25), .real(1e-300), .real(.greatestFiniteMagnitude)],
            [.text(Self.unicode), .text(""), .text(Self.withNUL)],
            [.blob(Self.zeroBlob), .blob([]), .blob([0])],
            [.null, .null, .null],
        ]
        for row in values {
            try db.run("INSERT INTO v(a, b, c) VALUES (?, ?, ?)", row)
        }
        let rows = try db.query("SELECT a, b, c FROM v ORDER BY id")
        #expect(rows.map(\.values) == values)
        #expect(rows.first?.columns == ["a", "b", "c"])
    }

    @Test func literalsMakeValues() {
        let values: [SQLiteValue] = [42, 2.5, "text", true]
        #expect(values == [.integer(42), .real(2.5), .text("text"), .integer(1)])
        #expect(SQLiteValue.text("it's").description == "'it''s'")
        #expect(SQLiteValue.blob([0, 0xAB]).description == "x'00ab'")
    }

    @Test func statementIsReusedWithRebinding() throws {
        let insert = try db.prepare("INSERT INTO v(a, b) VALUES (?, ?)")
        for i in 0..<1000 {
            try insert.bind(i, at: 1)
            try insert.bind("item \(i)", at: 2)
            try insert.run()
        }
        // run() keeps bindings, so the same values can be inserted again.
        try insert.run()
        #expect(try db.scalar("SELECT count(*) FROM v WHERE a = 999") == .integer(2))

        let select = try db.prepare("SELECT b FROM v WHERE a >= ? ORDER BY a")
        try select.bind([.integer(997)])
        #expect(try select.step())
        #expect(select.string(0) == "item 997")
        // Rebinding a half-stepped statement starts over instead of failing with SQLITE_MISUSE.
        try select.bind(998, at: 1)
        #expect(try select.rows().compactMap { $0.string("b") } == ["item 998", "item 999", "item 999"])
        // rows() starts from the first row even after step().
        #expect(try select.step())
        #expect(try select.rows().count == 3)
        #expect(try select.rows([.integer(999)]).count == 2)
    }

    @Test func resetClearsBindings() throws {
        let insert = try db.prepare("INSERT INTO v(a) VALUES (?)")
        try insert.bind("set", at: 1)
        insert.reset()
        try insert.run()
        #expect(try db.scalar("SELECT a FROM v") == .null)
    }

    @Test func namedParameters() throws {
        let insert = try db.prepare("INSERT INTO v(a, b) VALUES (:name, :name || '!')")
        #expect(insert.parameterCount == 1)
        let index = try #require(insert.parameterIndex(":name"))
        try insert.bind("hi", at: index)
        try insert.run()
        #expect(try db.query("SELECT a, b FROM v").first?.values == [.text("hi"), .text("hi!")])
        #expect(insert.parameterIndex(":missing") == nil)
    }

    @Test func bindingCountAndIndexAreChecked() throws {
        let few = #expect(throws: SQLiteError.self) { try db.run("INSERT INTO v(a, b) VALUES (?, ?)", [1]) }
        #expect(few?.code == SQLiteError.range)
        #expect(few?.message == "statement has 2 parameter(s) but 1 value(s) were given")
        #expect(few?.sql == "INSERT INTO v(a, b) VALUES (?, ?)")
        #expect(throws: SQLiteError.self) { try db.run("INSERT INTO v(a) VALUES (1)", [1]) }

        let insert = try db.prepare("INSERT INTO v(a) VALUES (?)")
        let outOfRange = #expect(throws: SQLiteError.self) { try insert.bind(1, at: 2) }
        #expect(outOfRange?.code == SQLiteError.range)
        #expect(outOfRange?.sql == "INSERT INTO v(a) VALUES (?)")
        #expect(try db.scalar("SELECT count(*) FROM v") == .integer(0))
    }

    @Test func failedStepLeavesStatementReusable() throws {
        try db.execute("CREATE UNIQUE INDEX v_a ON v(a)")
        let insert = try db.prepare("INSERT INTO v(a) VALUES (?)")
        try insert.run([1])
        let error = #expect(throws: SQLiteError.self) { try insert.run([1]) }
        #expect(error?.code == SQLiteError.constraint)
        try insert.run([2])
        #expect(try db.scalar("SELECT count(*) FROM v") == .integer(2))
    }

    @Test func columnMetadataAndRowAccessors() throws {
        try db.run("INSERT INTO v(a, b, c) VALUES (?, ?, ?)", [.integer(5), .real(2.0), .text("name")])
        let select = try db.prepare("SELECT id AS Ident, a, b, c, NULL AS empty FROM v")
        #expect(select.columnCount == 5)
        #expect(select.columnName(0) == "Ident")
        let row = try #require(try select.rows().first)
        #expect(row.columns == ["Ident", "a", "b", "c", "empty"])
        #expect(row[1] == .integer(5))
        #expect(row["ident"] == .integer(1))  // column names are case-insensitive, as in SQL
        #expect(row["missing"] == nil)
        #expect(row.int("a") == 5 && row.double("a") == 5.0 && row.bool("a") == true)
        #expect(row.int("b") == 2)  // an integral REAL
        #expect(row.string("c") == "name" && row.int("c") == nil)
        #expect(row.string("empty") == nil && row["empty"] == .null)
    }

    @Test func scalarDistinguishesNoRowFromNull() throws {
        #expect(try db.scalar("SELECT a FROM v") == nil)
        try db.run("INSERT INTO v(a) VALUES (NULL)")
        #expect(try db.scalar("SELECT a FROM v") == .null)
        #expect(try db.scalar("SELECT ? + ?", [2, 3]) == .integer(5))
    }
}
