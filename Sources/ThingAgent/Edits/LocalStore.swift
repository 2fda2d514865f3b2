import FoundationEssentials
import SQLite
import Synchronization
import ThingAgentCore


/// An edit: nil leaves a field as it is; an empty string clears it (the reported name shows again).
public struct DeviceEdit: Sendable, Equatable {
    public var name: String?
    public var room: String?
    public var icon: String?
    public var offlineWarning: Bool?

    public init(name: String? = nil, room: String? = nil, icon: String? = nil, offlineWarning: Bool? = nil) {
        self.name = name
        self.room = room
        self.icon = icon
        self.offlineWarning = offlineWarning
    }

    public var isEmpty: Bool { name == nil && room == nil && icon == nil && offlineWarning == nil }
}

/// A named group of devices.
public struct DeviceGroup: Sendable, Equatable {
    public var name: String
    public var devices: [String]
    public var createdAt: Millis
}

/// A Wi-Fi network kept for a device to fall back on.
public struct BackupNetwork: Sendable, Equatable {
    public var ssid: String
    public var password: String?
    /// Higher first.
    public var priority: Int
    public var addedAt: Millis

    public init(ssid: String, password: String? = nil, priority: Int = 0, addedAt: Millis = 0) {
        self.ssid = ssid
        self.password = password
        self.priority = priority
        self.addedAt = addedAt
    }
}


/// Local metadata, groups and backup networks, in the cache file's own tables (schema version 3).
///
/// Not cached in memory: every read goes to SQLite, so the daemon sees an edit made by the CLI (another process
/// writing the same file; WAL and the busy timeout let both work) at its next read, with nothing to invalidate.
/// Reads are rare (an API request, a detail page, an offline warning), never on the receive path.
package final class LocalStore: Sendable {
    private let database: Mutex<Database>
    package let path: String

    /// Opens its own connection to the cache file. `readOnly` for readers that must not migrate (the CLI's `info`).
    package init(path: String, readOnly: Bool = false) throws {
        self.database = Mutex(try CacheSchema.open(path, readOnly: readOnly))
        self.path = path
    }

    /// Closes the connection, runs `body`, and opens the file again, also when `body` throws (the daemon puts a
    /// cache file back under the path while no connection to the old one is open).
    func reopen(around body: () throws -> Void) throws {
        try database.withLock { database throws in
            var options = database.options
            options.create = false  // a path left empty by a failure stays empty: the next check sees it as lost
            database.close()
            defer {
                if let reopened = try? Database(path: path, options: options) { database = reopened }
            }
            try body()
        }
    }

    func withDatabase<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws -> T {
        try database.withLock { database throws -> T in try body(database) }
    }

    // MARK: offline alerts (the daemon's, through OfflineAlertStore: this connection is the one reopened when the
    // cache file is put back, so no other connection may hold the old file)

    func offlineAlerts() throws -> [(id: String, offlineSince: Millis, warned: Bool)] {
        try withDatabase { db in
            try db.query("SELECT dev_id, offline_since, warned FROM offline_alerts").compactMap { row in
                guard let id = row.string("dev_id"), let since = row.int("offline_since") else { return nil }
                return (id, since, (row.int("warned") ?? 0) != 0)
            }
        }
    }

    /// Upserts the given alerts (nil deletes the row) in one transaction.
    func saveOfflineAlerts(_ changes: [(id: String, alert: (offlineSince: Millis, warned: Bool)?)]) throws {
        try withDatabase { db in
            try db.transaction {
                for (id, alert) in changes {
                    if let alert {
                        try db.run("""
                            INSERT INTO offline_alerts (dev_id, offline_since, warned) VALUES (?, ?, ?)
                            ON CONFLICT(dev_id) DO UPDATE SET offline_since = excluded.offline_since,
                                warned = excluded.warned
                            """, [.text(id), .integer(alert.offlineSince), .integer(alert.warned ? 1 : 0)])
                    } else {
                        try db.run("DELETE FROM offline_alerts WHERE dev_id = ?", [.text(id)])
                    }
                }
            }
        }
    }

    // MARK: metadata

    /// The device's local metadata; defaults (no local name, offline warning on) when never edited.
    package func metadata(_ id: String) throws -> DeviceMetadata {
        try withDatabase { db in try LocalTables.metadata(id, in: db) }
    }

    /// Every edited device's metadata (one query for a whole list).
    package func allMetadata() throws -> [String: DeviceMetadata] {
        try withDatabase { db in try LocalTables.allMetadata(in: db) }
    }

    /// On any connection to the file (the CLI's reader reads it on the one it reads the device with).

    /// Whether the offline watch may warn about the device (true when unreadable: a warning too many beats none).
    package func offlineWarningEnabled(_ id: String) -> Bool {
        (try? metadata(id).offlineWarning) ?? true
    }

    /// Applies an edit and returns the metadata as it now is.
    @discardableResult
    package func edit(_ id: String, _ edit: DeviceEdit, now: Millis = Timestamp.current) throws -> DeviceMetadata {
        guard DeviceID.isValid(id) else { throw EditError.invalid("'\(id)' is not a device id") }
        if let icon = edit.icon, !icon.isEmpty, URL(string: icon)?.scheme == nil {
            throw EditError.invalid("the icon must be a URL (https://…, file://…)")
        }
        return try withDatabase { db in
            try db.transaction(.immediate) {
                var meta = try db.query(
                    "SELECT name, room, icon, offline_warning FROM device_meta WHERE dev_id = ?", [.text(id)]
                ).first.map { row in
                    DeviceMetadata(name: row.string("name"), room: row.string("room"), icon: row.string("icon"),
                                   offlineWarning: (row.int("offline_warning") ?? 1) != 0)
                } ?? DeviceMetadata()
                func apply(_ value: String?, to field: inout String?) {
                    guard let value else { return }
                    field = value.isEmpty ? nil : value
                }
                apply(edit.name, to: &meta.name)
                apply(edit.room, to: &meta.room)
                apply(edit.icon, to: &meta.icon)
                if let warning = edit.offlineWarning { meta.offlineWarning = warning }
                meta.updatedAt = now
                try db.run("""
                    INSERT INTO device_meta (dev_id, name, room, icon, offline_warning, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT(dev_id) DO UPDATE SET name = excluded.name, room = excluded.room, icon = excluded.icon,
                    offline_warning = excluded.offline_warning, updated_at = excluded.updated_at
                    """, [.text(id), Self.text(meta.name), Self.text(meta.room), Self.text(meta.icon),
                          .integer(meta.offlineWarning ? 1 : 0), .integer(now)])
                return meta
            }
        }
    }

    // MARK: groups

    /// Every group with its members, by name.
    package func groups() throws -> [DeviceGroup] {
        try withDatabase { db in try Self.groups(db, where: nil, []) }
    }

    /// The groups the device belongs to.
    package func groups(containing id: String) throws -> [DeviceGroup] {
        try withDatabase { db in
            try Self.groups(db, where: "g.group_id IN (SELECT group_id FROM group_members WHERE dev_id = ?)", [.text(id)])
        }
    }

    package func group(named name: String) throws -> DeviceGroup? {
        try withDatabase { db in try Self.groups(db, where: "g.name = ?", [.text(name)]).first }
    }

    private static func groups(_ db: Database, where condition: String?, _ bindings: [SQLiteValue]) throws -> [DeviceGroup] {
        let rows = try db.query("""
            SELECT g.name AS name, g.created_at AS created_at, m.dev_id AS dev_id
            FROM device_groups g LEFT JOIN group_members m ON m.group_id = g.group_id
            \(condition.map { "WHERE \($0)" } ?? "") ORDER BY g.name, m.dev_id
            """, bindings)
        var groups: [DeviceGroup] = []
        for row in rows {
            let name = row.string("name") ?? ""
            if groups.last?.name != name {
                groups.append(DeviceGroup(name: name, devices: [], createdAt: row.int("created_at") ?? 0))
            }
            if let device = row.string("dev_id") { groups[groups.count - 1].devices.append(device) }
        }
        return groups
    }

    /// Creates a group (a name not yet taken) with the given members.
    @discardableResult
    package func createGroup(_ name: String, devices: [String] = [], now: Millis = Timestamp.current) throws -> DeviceGroup {
        guard !name.isEmpty, name.count <= 64 else { throw EditError.invalid("a group name has 1 to 64 characters") }
        try validate(devices)
        try withDatabase { db in
            try db.transaction(.immediate) {
                if try db.scalar("SELECT 1 FROM device_groups WHERE name = ?", [.text(name)]) != nil {
                    throw EditError.groupExists(name)
                }
                try db.run("INSERT INTO device_groups (name, created_at) VALUES (?, ?)", [.text(name), .integer(now)])
                let id = db.lastInsertRowID
                for device in devices {
                    try db.run("INSERT OR IGNORE INTO group_members (group_id, dev_id) VALUES (?, ?)",
                               [.integer(id), .text(device)])
                }
            }
        }
        return try group(named: name) ?? DeviceGroup(name: name, devices: devices, createdAt: now)
    }

    /// Deletes a group; false when there was none of that name.
    @discardableResult
    package func deleteGroup(_ name: String) throws -> Bool {
        try withDatabase { db in
            try db.run("DELETE FROM device_groups WHERE name = ?", [.text(name)])
            return db.changes > 0
        }
    }

    /// Adds devices to a group (already members stay).
    package func addToGroup(_ name: String, devices: [String]) throws {
        try validate(devices)
        try withDatabase { db in
            try db.transaction(.immediate) {
                guard case .integer(let id)? = try db.scalar(
                    "SELECT group_id FROM device_groups WHERE name = ?", [.text(name)]) else { throw EditError.unknownGroup(name) }
                for device in devices {
                    try db.run("INSERT OR IGNORE INTO group_members (group_id, dev_id) VALUES (?, ?)",
                               [.integer(id), .text(device)])
                }
            }
        }
    }

    /// Removes devices from a group.
    package func removeFromGroup(_ name: String, devices: [String]) throws {
        try withDatabase { db in
            try db.transaction(.immediate) {
                guard case .integer(let id)? = try db.scalar(
                    "SELECT group_id FROM device_groups WHERE name = ?", [.text(name)]) else { throw EditError.unknownGroup(name) }
                for device in devices {
                    try db.run("DELETE FROM group_members WHERE group_id = ? AND dev_id = ?", [.integer(id), .text(device)])
                }
            }
        }
    }

    // MARK: backup networks

    /// The device's backup Wi-Fi networks, highest priority first.
    package func backupNetworks(_ id: String) throws -> [BackupNetwork] {
        try withDatabase { db in
            try db.query("""
                SELECT ssid, password, priority, added_at FROM backup_networks WHERE dev_id = ?
                ORDER BY priority DESC, added_at, ssid
                """, [.text(id)]).map { row in
                BackupNetwork(ssid: row.string("ssid") ?? "", password: row.string("password"),
                              priority: Int(row.int("priority") ?? 0), addedAt: row.int("added_at") ?? 0)
            }
        }
    }

    /// Adds a backup network, or replaces the one with the same SSID.
    package func addBackupNetwork(_ id: String, _ network: BackupNetwork, now: Millis = Timestamp.current) throws {
        guard DeviceID.isValid(id) else { throw EditError.invalid("'\(id)' is not a device id") }
        guard !network.ssid.isEmpty, network.ssid.utf8.count <= 32 else {
            throw EditError.invalid("an SSID has 1 to 32 bytes")
        }
        if let password = network.password, !(password.isEmpty || (8...63).contains(password.utf8.count)) {
            throw EditError.invalid("a WPA password has 8 to 63 characters")
        }
        try withDatabase { db in
            try db.run("""
                INSERT INTO backup_networks (dev_id, ssid, password, priority, added_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(dev_id, ssid) DO UPDATE SET password = excluded.password, priority = excluded.priority
                """, [.text(id), .text(network.ssid), Self.text(network.password), .integer(Int64(network.priority)),
                      .integer(network.addedAt == 0 ? now : network.addedAt)])
        }
    }

    /// Removes a backup network; false when the device had none with that SSID.
    @discardableResult
    package func removeBackupNetwork(_ id: String, ssid: String) throws -> Bool {
        try withDatabase { db in
            try db.run("DELETE FROM backup_networks WHERE dev_id = ? AND ssid = ?", [.text(id), .text(ssid)])
            return db.changes > 0
        }
    }

    // MARK: removal

    /// Deletes everything kept about a device: its cached row (with properties and transfer), local metadata,
    /// group memberships, scene actions, link memberships and backup networks (a scene left with no action and a
    /// link left with one member go too). Returns whether it had a cached row.
    @discardableResult
    package func deleteDevice(_ id: String) throws -> Bool {
        try withDatabase { db in try CacheSchema.deleteDevice(id, in: db) }
    }

    /// What removing the device would take it out of: groups, scene actions, links (`DeviceRemoval`).
    package func references(of id: String) throws -> DeviceRemoval {
        try withDatabase { db in try RemovalMoves.references(of: id, in: db) }
    }

    private func validate(_ devices: [String]) throws {
        if let bad = devices.first(where: { !DeviceID.isValid($0) }) {
            throw EditError.invalid("'\(bad)' is not a device id")
        }
    }

    static func text(_ value: String?) -> SQLiteValue {
        value.map(SQLiteValue.text) ?? .null
    }
}
