import Dispatch
import FoundationEssentials
import JSON
import Platform
import SQLite
import Synchronization

/// The SQLite side of the cache: writes what changed, reads everything back at start.
/// Not thread-safe: its owner serializes access (the ingest path holds it in a Mutex).
final package class CacheStore {
    package let database: Database
    private let upsertDevice: Statement
    private let upsertProperty: Statement
    private let touchDevice: Statement
    private let upsertTransfer: Statement
    private let upsertEvent: Statement

    /// Opens (or creates) the cache file and brings its schema up to date.
    package init(path: String, readOnly: Bool = false) throws {
        var options = Database.Options()
        options.readOnly = readOnly
        // SQLite would create the file 0644 under the usual umask; its -wal and -shm take the main file's mode.
        // SQLite's in-memory database is no file (the fuzzer's store): making one would leave ":memory:" behind.
        if !readOnly, path != ":memory:" { PrivateFiles.createIfMissing(path) }
        database = try Database(path: path, options: options)
        if !readOnly {
            _ = try Migrator(CacheSchema.migrations).migrate(database)
        } else {
            try CacheSchema.requireCurrent(database)
        }
        let columns = CacheSchema.deviceColumns
        upsertDevice = try database.prepare("""
            INSERT INTO devices (\(columns.joined(separator: ", ")))
            VALUES (\(Array(repeating: "?", count: columns.count).joined(separator: ", ")))
            ON CONFLICT(dev_id) DO UPDATE SET
            \(columns.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
            """)
        touchDevice = try database.prepare("UPDATE devices SET updated_at = ? WHERE dev_id = ?")
        upsertProperty = try database.prepare("""
            INSERT INTO properties (dev_id, code, value, time) VALUES (?, ?, ?, ?)
            ON CONFLICT(dev_id, code) DO UPDATE SET value = excluded.value, time = excluded.time
            """)
        upsertTransfer = try database.prepare("""
            INSERT INTO transfers (gateway_id, target_id, target_name, status, failed_code, time, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(gateway_id) DO UPDATE SET target_id = excluded.target_id, target_name = excluded.target_name,
            status = excluded.status, failed_code = excluded.failed_code, time = excluded.time,
            updated_at = excluded.updated_at
            """)
        upsertEvent = try database.prepare("""
            INSERT INTO device_events (dev_id, name, params, time) VALUES (?, ?, ?, ?)
            ON CONFLICT(dev_id, name) DO UPDATE SET params = excluded.params, time = excluded.time
            """)
    }

    /// Writes a device's row and the named properties (and its transfer). The caller wraps calls in a transaction.
    /// Writes a device: its whole row when `row`, else only `updated_at` (property reports, the common case, leave
    /// the thirty columns of the row as they were).
    package func write(_ device: DeviceSnapshot, row: Bool, properties codes: some Sequence<String>, transfer: Bool,
                       events names: some Sequence<String> = [String]()) throws {
        if row {
            try writeDevice(device)
        } else {
            try touchDevice.bind(device.updatedAt, at: 1)
            try touchDevice.bind(device.id, at: 2)
            try touchDevice.run()
        }
        for code in codes {
            guard let property = device.properties[code] else { continue }
            try upsert(upsertProperty, device.id, code, property.value, time: property.time)
        }
        if transfer, let info = device.transfer {
            try writeTransfer(info)
        }
        for name in names {
            guard let event = device.events[name] else { continue }
            try upsert(upsertEvent, device.id, name, event.params, time: event.time)
        }
    }

    /// One keyed value of a device (a property, an event's parameters) as JSON text, with its time.
    private func upsert(_ statement: Statement, _ device: String, _ key: String, _ value: JSONValue,
                        time: Millis) throws {
        try statement.bind(device, at: 1)
        try statement.bind(key, at: 2)
        try statement.bind(value.serialized(), at: 3)
        try statement.bind(time, at: 4)
        try statement.run()
    }

    /// Where the journal stands in SQLite: its generation and the offset up to which its records are applied.
    package func journalPosition() throws -> (generation: UInt64, applied: Int64) {
        let rows = try database.query("SELECT key, value FROM meta WHERE key IN ('journal_generation', 'journal_applied')")
        var generation: UInt64 = 0, applied: Int64 = 0
        for row in rows {
            if row.string("key") == "journal_generation" { generation = UInt64(row.int("value") ?? 0) }
            if row.string("key") == "journal_applied" { applied = row.int("value") ?? 0 }
        }
        return (generation, applied)
    }

    /// Records the journal position; part of the flusher's transaction, so it moves with the data it covers.
    package func setJournalPosition(generation: UInt64, applied: Int64) throws {
        try database.run("""
            INSERT INTO meta (key, value) VALUES ('journal_generation', ?), ('journal_applied', ?)
            ON CONFLICT(key) DO UPDATE SET value = excluded.value
            """, [.integer(Int64(generation)), .integer(applied)])
    }

    /// Writes `meta` rows (the daemon's receive-path counters); the caller wraps calls in a transaction.
    package func setMeta(_ rows: [(key: String, value: Int64)]) throws {
        let upsert = try database.prepare("""
            INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value
            """)
        for row in rows {
            try upsert.bind(row.key, at: 1)
            try upsert.bind(row.value, at: 2)
            try upsert.run()
        }
    }

    /// The `meta` rows whose key starts with `prefix`.
    package func meta(prefix: String) throws -> [String: Int64] {
        try Self.meta(prefix: prefix, in: database)
    }

    static package func meta(prefix: String, in database: Database) throws -> [String: Int64] {
        var rows: [String: Int64] = [:]
        for row in try database.query("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?",
                                      [.integer(Int64(prefix.utf8.count)), .text(prefix)]) {
            if let key = row.string("key"), let value = row.int("value") { rows[key] = value }
        }
        return rows
    }

    package func writeDevice(_ device: DeviceSnapshot) throws {
        let statement = upsertDevice
        var index: Int32 = 1
        func next() -> Int32 {
            defer { index += 1 }
            return index
        }
        try statement.bind(device.id, at: next())
        for (index, field) in DeviceInfo.fields.enumerated() {
            let at = next()
            switch device.info.value(at: index) {
            case .null: try statement.bindNull(at: at)
            case .string(let text): try statement.bind(text, at: at)
            case let value:
                if let integer = value.int64Value, field.type.isInteger {
                    try statement.bind(integer, at: at)
                } else {
                    try statement.bind(value.serialized(), at: at)
                }
            }
        }
        try statement.bind(device.infoTime, at: next())
        try statement.bind(device.online.map { $0 ? Int64(1) : 0 }, at: next())
        try statement.bind(device.statusTime, at: next())
        try statement.bind(device.statusChangedAt, at: next())
        try statement.bind(device.wifiSignal?.time, at: next())
        try statement.bind(device.rsrp?.time, at: next())
        try statement.bind(device.firstSeen, at: next())
        try statement.bind(device.updatedAt, at: next())
        try statement.bind(device.presence?.rawValue, at: next())
        try statement.run()
    }

    package func writeTransfer(_ transfer: TransferInfo) throws {
        try upsertTransfer.bind(transfer.sourceDeviceId, at: 1)
        try upsertTransfer.bind(transfer.targetDeviceId, at: 2)
        try upsertTransfer.bind(transfer.targetDeviceName, at: 3)
        try upsertTransfer.bind(Int64(transfer.status.rawValue), at: 4)
        try upsertTransfer.bind(transfer.failedCode, at: 5)
        try upsertTransfer.bind(transfer.time, at: 6)
        try upsertTransfer.bind(transfer.updatedAt, at: 7)
        try upsertTransfer.run()
    }

    /// Reads the whole cache. Called once at start, before the broker connects.
    /// `shouldStop` is asked every few thousand rows: true ends the load with `StartUpInterrupted` (a SIGTERM
    /// while a big cache loads is honoured at once).
    package func loadAll(shouldStop: @escaping @Sendable () -> Bool = { false }) throws -> [String: DeviceSnapshot] {
        try Self.loadAll(database, shouldStop: shouldStop)
    }

    static package func loadAll(_ database: Database,
                        shouldStop: @escaping @Sendable () -> Bool = { false }) throws -> [String: DeviceSnapshot] {
        try load(database, filter: nil, [], shouldStop: shouldStop)
    }

    /// Reads one device (the CLI's `info`: no need to load the fleet).
    package func loadDevice(_ id: String) throws -> DeviceSnapshot? {
        try Self.loadDevice(id, from: database)
    }

    static package func loadDevice(_ id: String, from database: Database) throws -> DeviceSnapshot? {
        // Its properties and transfer by their own keys rather than through a subquery on `devices`: compiling the
        // subqueries was a large part of SQLite's work for a short `info`.
        try load(database, filter: "dev_id = ?", [.text(id)],
                 scopes: (properties: " WHERE dev_id = ?", transfers: " WHERE gateway_id = ?",
                          events: " WHERE dev_id = ?"))[id]
    }

    /// Reads the devices whose info names `gateway` (indexed by `devices_by_gateway`).
    static package func loadSubDevices(of gateway: String, from database: Database) throws -> [DeviceSnapshot] {
        try load(database, filter: "gateway_id = ?", [.text(gateway)]).values.sorted { $0.id < $1.id }
    }

    /// Reads the devices matching an SQL condition on `devices` (and their properties and transfers).
    /// The whole cache is read on two threads: the properties on a second connection while the device rows load.
    /// `scopes`: the conditions on `properties` and `transfers` that pick the same devices with the same bindings
    /// (by default, those whose device matches `filter`).
    private static func load(_ database: Database, filter: String?, _ bindings: [SQLiteValue],
                             scopes: (properties: String, transfers: String, events: String)? = nil,
                             shouldStop: @escaping @Sendable () -> Bool = { false }) throws -> [String: DeviceSnapshot] {
        let scope = scopes?.properties ?? filter.map { " WHERE dev_id IN (SELECT dev_id FROM devices WHERE \($0))" } ?? ""
        let tables: [(String, PropertyTable)]
        var devices: [String: DeviceSnapshot]
        if filter == nil {
            let result = Mutex<Result<[(String, PropertyTable)], any Error>?>(nil)
            let done = DispatchSemaphore(value: 0)
            let path = database.path
            startDetachedThread(name: "cache-properties") {
                let loaded = Result { () throws -> [(String, PropertyTable)] in
                    try Self.loadProperties(Database(path: path, options: .init(readOnly: true)), scope: "", [],
                                            shouldStop: shouldStop)
                }
                result.withLock { $0 = loaded }
                done.signal()
            }
            let rows = Result { try Self.loadDevices(database, condition: "", [], shouldStop: shouldStop) }
            done.wait()
            devices = try rows.get()
            tables = try result.withLock { $0! }.get()
        } else {
            devices = try Self.loadDevices(database, condition: filter.map { " WHERE \($0)" } ?? "", bindings)
            tables = try Self.loadProperties(database, scope: scope, bindings, interning: false)
        }
        for (id, table) in tables {
            // Through the index: an optional-chained assignment would copy the whole snapshot out and back.
            if let index = devices.index(forKey: id) { devices.values[index].properties = table }
        }
        let transferScope = scopes?.transfers
            ?? filter.map { " WHERE gateway_id IN (SELECT dev_id FROM devices WHERE \($0))" } ?? ""
        let transfers = try database.prepare("""
            SELECT gateway_id, target_id, target_name, status, failed_code, time, updated_at FROM transfers\(transferScope)
            """)
        try transfers.bind(bindings)
        while try transfers.step() {
            guard let id = transfers.string(0) else { continue }
            devices[id]?.transfer = TransferInfo(
                sourceDeviceId: id, targetDeviceId: transfers.string(1), targetDeviceName: transfers.string(2),
                status: TransferStatus(rawValue: transfers.int(3)) ?? .unknown,
                failedCode: transfers.string(4) ?? "", time: transfers.int64(5), updatedAt: transfers.int64(6))
        }
        let events = try database.prepare("SELECT dev_id, name, params, time FROM device_events\(scopes?.events ?? scope)")
        try events.bind(bindings)
        while try events.step() {
            guard let id = events.string(0), let name = events.string(1), let text = events.string(2),
                  let index = devices.index(forKey: id) else { continue }
            let params = (try? JSONParser.parse(text)) ?? .object([:])
            devices.values[index].events[name] = ThingEvent(name: name, params: params, time: events.int64(3))
        }
        return devices
    }

    private static func loadDevices(_ database: Database, condition: String, _ bindings: [SQLiteValue],
                                    shouldStop: () -> Bool = { false }) throws -> [String: DeviceSnapshot] {
        var devices: [String: DeviceSnapshot] = [:]
        if condition.isEmpty, let count = try database.scalar("SELECT count(*) FROM devices"), case .integer(let n) = count {
            devices.reserveCapacity(Int(n))
        }
        var builder = FieldStorage.Builder(capacity: 512)
        let kinds = InfoColumn.all
        let select = try database.prepare(
            "SELECT \(CacheSchema.deviceColumnList) FROM devices\(condition)")
        try select.bind(bindings)
        var rows = 0
        while try select.step() {
            rows += 1
            if rows & 4095 == 0, shouldStop() { throw StartUpInterrupted() }
            let device = try device(from: select, kinds: kinds, builder: &builder)
            let id = device.id
            // Moved in, not copied: a copy retained each of the snapshot's buffers only to release them again.
            devices[id] = consume device
        }
        return devices
    }

    /// Each device's properties. The table is keyed (dev_id, code), so rows come grouped by device.
    /// `interning`: share equal values and parse repeated texts once, which pays on the whole fleet; a few devices
    /// (`info`) only pay for the interner's tables.
    private static func loadProperties(_ database: Database, scope: String, _ bindings: [SQLiteValue],
                                       interning: Bool = true,
                                       shouldStop: () -> Bool = { false }) throws -> [(String, PropertyTable)] {
        let interner = interning ? ValueInterner() : nil
        let properties = try database.prepare("SELECT dev_id, code, value, time FROM properties\(scope)")
        try properties.bind(bindings)
        var tables: [(String, PropertyTable)] = []
        var currentID: String?
        var table = PropertyTable()
        var rows = 0
        while try properties.step() {
            rows += 1
            if rows & 4095 == 0, shouldStop() { throw StartUpInterrupted() }
            guard let id = properties.string(0), let code = properties.string(1),
                  let text = properties.string(2) else { continue }
            if currentID != id {
                if let currentID { tables.append((currentID, table)) }
                currentID = id
                table = PropertyTable()
            }
            let value = interner?.parse(text) ?? ValueInterner.parseUninterned(text)
            table[code] = PropertyValue(value: value, time: properties.int64(3))
        }
        if let currentID { tables.append((currentID, table)) }
        return tables
    }

    /// How each info column is read, worked out once per load rather than per row and column (the field table is
    /// a global, and its types carry arrays that a per-column `switch` retained and released).
    private enum InfoColumn {
        case wifi, rsrp, integer, json, text

        static var all: [InfoColumn] {
            DeviceInfo.fields.enumerated().map { index, field in
                switch (index, field.type) {
                case (DeviceInfo.wifiIndex, _): .wifi
                case (DeviceInfo.rsrpIndex, _): .rsrp
                case (_, .integer): .integer
                case (_, .stringArray), (_, .object): .json
                case (_, .string), (_, .oneOf): .text
                }
            }
        }
    }

    private static func device(from row: Statement, kinds: [InfoColumn],
                               builder: inout FieldStorage.Builder) throws -> DeviceSnapshot {
        var column: Int32 = 0
        func next() -> Int32 {
            defer { column += 1 }
            return column
        }
        func optionalInt(_ i: Int32) -> Int64? { row.isNull(i) ? nil : row.int64(i) }

        let id = row.string(next()) ?? ""
        var signal: (wifi: Int64?, rsrp: Int64?) = (nil, nil)
        for kind in kinds {
            let i = next()
            // Text columns say NULL through `withText` itself; only the integers need the type asked for (it is
            // a library call per column, most of the columns are text, and this runs for every device at start).
            switch kind {
            case .wifi:
                if !row.isNull(i) { signal.wifi = row.int64(i) }
                builder.appendNull()
            case .rsrp:
                if !row.isNull(i) { signal.rsrp = row.int64(i) }
                builder.appendNull()
            case .integer: row.isNull(i) ? builder.appendNull() : builder.appendInteger(row.int64(i))
            case .json: row.withText(i) { $0.map { builder.appendJSON($0) } ?? builder.appendNull() }
            case .text: row.withText(i) { $0.map { builder.appendString($0) } ?? builder.appendNull() }
            }
        }
        var device = DeviceSnapshot(
            id: id, info: DeviceInfo(devId: id, storage: builder.build(), wifiSignal: signal.wifi, rsrp: signal.rsrp),
            seenAt: 0)
        device.infoTime = optionalInt(next())
        device.online = optionalInt(next()).map { $0 != 0 }
        device.statusTime = optionalInt(next())
        device.statusChangedAt = optionalInt(next())
        if let time = optionalInt(next()), let dBm = device.info.wifiSignal {
            device.wifiSignal = SignalReading(dBm: dBm, time: time)
        }
        if let time = optionalInt(next()), let dBm = device.info.rsrp {
            device.rsrp = SignalReading(dBm: dBm, time: time)
        }
        device.firstSeen = row.int64(next())
        device.updatedAt = row.int64(next())
        device.presence = row.string(next()).flatMap(PresenceSource.init(rawValue:))
        return device
    }
}

public enum CacheError: Error, Sendable, CustomStringConvertible {
    case schemaTooOld(path: String, version: Int)

    public var description: String {
        switch self {
        case .schemaTooOld(let path, let version):
            "the cache \(path) has schema version \(version); run the agent once to upgrade it"
        }
    }
}
