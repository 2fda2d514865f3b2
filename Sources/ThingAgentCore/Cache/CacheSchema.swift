import SQLite

/// The cache's SQLite schema, by version. Documented in the docs/cache-file.md; readable with `sqlite3`.
///
/// Each migration is literal SQL and frozen once released: a file migrated by an older build must end up with the
/// same schema as a new one. A new `DeviceInfo` field gets a new migration (`ALTER TABLE devices ADD COLUMN`);
/// `CacheRulesTests` checks that every field has its column.
package enum CacheSchema {
    static package let migrations: [Migration] = [
        Migration(version: 1, name: "devices, properties, transfers", sql: """
            CREATE TABLE devices (
                dev_id            TEXT PRIMARY KEY NOT NULL,
                name              TEXT,
                product_id        TEXT,
                category          TEXT,
                ip                TEXT,
                lan_ip            TEXT,
                mac               TEXT,
                timezone          TEXT,
                net_strength      TEXT,
                wifi_signal       INTEGER,
                iccid             TEXT,
                rsrp              INTEGER,
                channel           INTEGER,
                vendor_name       TEXT,
                homekit_code      TEXT,
                connect_ability   TEXT,
                gateway_id        TEXT,
                space_id          INTEGER,
                firmware_version  TEXT,
                abilities         TEXT,
                hardware_info     TEXT,
                info_time         INTEGER,
                online            INTEGER,
                status_time       INTEGER,
                status_changed_at INTEGER,
                wifi_signal_time  INTEGER,
                rsrp_time         INTEGER,
                first_seen        INTEGER NOT NULL,
                updated_at        INTEGER NOT NULL
            );
            CREATE INDEX devices_by_gateway ON devices(gateway_id) WHERE gateway_id IS NOT NULL;
            CREATE TABLE properties (
                dev_id TEXT NOT NULL REFERENCES devices(dev_id) ON DELETE CASCADE,
                code   TEXT NOT NULL,
                value  TEXT NOT NULL,
                time   INTEGER NOT NULL,
                PRIMARY KEY (dev_id, code)
            ) WITHOUT ROWID;
            CREATE TABLE transfers (
                gateway_id  TEXT PRIMARY KEY NOT NULL REFERENCES devices(dev_id) ON DELETE CASCADE,
                target_id   TEXT,
                target_name TEXT,
                status      INTEGER NOT NULL,
                failed_code TEXT NOT NULL DEFAULT '',
                time        INTEGER NOT NULL,
                updated_at  INTEGER NOT NULL
            );
            """),
        Migration(version: 2, name: "journal bookkeeping", sql: """
            CREATE TABLE meta (
                key   TEXT PRIMARY KEY NOT NULL,
                value INTEGER NOT NULL
            ) WITHOUT ROWID;
            """),
        // Local data that devices never report: kept apart from `devices` so that info reports cannot overwrite
        // it. No foreign keys to `devices`: the daemon writes `devices` in batches, a CLI edit may come first.
        Migration(version: 3, name: "local metadata, groups, backup networks", sql: """
            CREATE TABLE device_meta (
                dev_id          TEXT PRIMARY KEY NOT NULL,
                name            TEXT,
                room            TEXT,
                icon            TEXT,
                offline_warning INTEGER NOT NULL DEFAULT 1,
                updated_at      INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE device_groups (
                group_id   INTEGER PRIMARY KEY,
                name       TEXT NOT NULL UNIQUE,
                created_at INTEGER NOT NULL
            );
            CREATE TABLE group_members (
                group_id INTEGER NOT NULL REFERENCES device_groups(group_id) ON DELETE CASCADE,
                dev_id   TEXT NOT NULL,
                PRIMARY KEY (group_id, dev_id)
            ) WITHOUT ROWID;
            CREATE INDEX group_members_by_device ON group_members(dev_id);
            CREATE TABLE backup_networks (
                dev_id   TEXT NOT NULL,
                ssid     TEXT NOT NULL,
                password TEXT,
                priority INTEGER NOT NULL DEFAULT 0,
                added_at INTEGER NOT NULL,
                PRIMARY KEY (dev_id, ssid)
            ) WITHOUT ROWID;
            """),
        // The daemon's offline warnings, so that a restart neither forgets a grace period that was running nor
        // warns twice about one offline episode. Agent times (ms); a row lives while the device stays offline.
        Migration(version: 4, name: "offline alerts", sql: """
            CREATE TABLE offline_alerts (
                dev_id        TEXT PRIMARY KEY NOT NULL,
                offline_since INTEGER NOT NULL,
                warned        INTEGER NOT NULL DEFAULT 0
            ) WITHOUT ROWID;
            """),
        // The latest firmware upgrade per device. No foreign key: a removed device's row goes with
        // `deleteDevice`, and an upgrade outlives a device that is briefly unknown while it reboots.
        Migration(version: 5, name: "firmware upgrades", sql: """
            CREATE TABLE ota_upgrades (
                dev_id       TEXT PRIMARY KEY NOT NULL,
                from_version TEXT,
                version      TEXT NOT NULL,
                url          TEXT NOT NULL,
                sha256       TEXT NOT NULL,
                size         INTEGER,
                stage        TEXT NOT NULL,
                progress     INTEGER NOT NULL DEFAULT 0,
                failed_code  TEXT NOT NULL DEFAULT '',
                started_at   INTEGER NOT NULL,
                updated_at   INTEGER NOT NULL,
                report_time  INTEGER NOT NULL DEFAULT 0,
                ended_at     INTEGER
            ) WITHOUT ROWID;
            """),
        // Scenes, multi-control links and gateway replacements, all local (devices never report them). A scene's
        // actions are one JSON array (`[{"device","set"}]`, the scenes file's form), written and read whole.
        // `scene_imports` remembers each scene as the scenes file last gave it, so that a restart or a reload
        // neither brings back a deleted scene nor overwrites one changed since. No foreign keys to `devices`
        // (see migration 3).
        Migration(version: 6, name: "scenes, links, gateway replacements", sql: """
            CREATE TABLE scenes (
                name        TEXT PRIMARY KEY NOT NULL,
                description TEXT,
                actions     TEXT NOT NULL,
                created_at  INTEGER NOT NULL,
                updated_at  INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE scene_imports (
                name        TEXT PRIMARY KEY NOT NULL,
                scene       TEXT NOT NULL,
                file        TEXT NOT NULL,
                imported_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE device_links (
                name       TEXT PRIMARY KEY NOT NULL,
                created_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            CREATE TABLE link_members (
                link     TEXT NOT NULL REFERENCES device_links(name) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                dev_id   TEXT NOT NULL,
                code     TEXT NOT NULL,
                PRIMARY KEY (link, dev_id, code)
            ) WITHOUT ROWID;
            CREATE INDEX link_members_by_device ON link_members(dev_id);
            CREATE TABLE gateway_replacements (
                old_id      TEXT NOT NULL,
                new_id      TEXT NOT NULL,
                time        INTEGER NOT NULL,
                moved       TEXT NOT NULL,
                recorded_at INTEGER NOT NULL,
                PRIMARY KEY (old_id, new_id, time)
            ) WITHOUT ROWID;
            """),
        // Pairings (thing-agent pair) and the devices they activated. The token is kept only as its SHA-256
        // (hex): the file never holds what would activate a device. `cleaned` is set once the pairing's bootstrap
        // broker credentials are deleted. `provisioned_devices` holds what the broker's roles are computed from.
        Migration(version: 7, name: "pairings, provisioned devices", sql: """
            CREATE TABLE pairings (
                username   TEXT PRIMARY KEY NOT NULL,
                token_hash TEXT NOT NULL UNIQUE,
                space_id   INTEGER,
                gateway_id TEXT,
                product_id TEXT,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                state      TEXT NOT NULL DEFAULT 'pending',
                dev_id     TEXT,
                ended_at   INTEGER,
                cleaned    INTEGER NOT NULL DEFAULT 0
            ) WITHOUT ROWID;
            CREATE TABLE provisioned_devices (
                dev_id       TEXT PRIMARY KEY NOT NULL,
                gateway_id   TEXT,
                pairing      TEXT NOT NULL,
                activated_at INTEGER NOT NULL
            ) WITHOUT ROWID;
            """),
        // The broker clients and roles the agent itself created (kind 'client' or 'role'): the only ones it ever
        // deletes. A name prefix proves nothing (an operator's role may be called device-readers), and a lost or
        // older cache file must not delete credentials it has no record of. Seeded from migration 7's records.
        Migration(version: 8, name: "broker grants the agent made", sql: """
            CREATE TABLE broker_grants (
                kind       TEXT NOT NULL,
                name       TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (kind, name)
            ) WITHOUT ROWID;
            INSERT OR IGNORE INTO broker_grants (kind, name, created_at)
                SELECT 'client', dev_id, activated_at FROM provisioned_devices WHERE gateway_id IS NULL;
            INSERT OR IGNORE INTO broker_grants (kind, name, created_at)
                SELECT 'role', 'device-' || dev_id, activated_at FROM provisioned_devices WHERE gateway_id IS NULL;
            INSERT OR IGNORE INTO broker_grants (kind, name, created_at)
                SELECT 'client', username, created_at FROM pairings WHERE cleaned = 0;
            INSERT OR IGNORE INTO broker_grants (kind, name, created_at)
                SELECT 'role', 'pairing-' || username, created_at FROM pairings;
            """),
        // The primary key's columns first: SQLite 3.40's integrity_check reports a WITHOUT ROWID table's NOT NULL
        // column that sits between key columns as NULL ("NULL value in link_members.position") though it is not.
        Migration(version: 9, name: "link members, key columns first", sql: """
            CREATE TABLE link_members_keyed (
                link     TEXT NOT NULL REFERENCES device_links(name) ON DELETE CASCADE,
                dev_id   TEXT NOT NULL,
                code     TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (link, dev_id, code)
            ) WITHOUT ROWID;
            INSERT INTO link_members_keyed (link, dev_id, code, position)
                SELECT link, dev_id, code, position FROM link_members;
            DROP TABLE link_members;
            ALTER TABLE link_members_keyed RENAME TO link_members;
            CREATE INDEX link_members_by_device ON link_members(dev_id);
            """),
        // A used pairing's answer `data` (the device's broker credentials), kept until its bootstrap credentials
        // go, so that a device whose answer was lost gets the same answer when it asks again.
        Migration(version: 10, name: "a used pairing's answer", sql: """
            ALTER TABLE pairings ADD COLUMN answer TEXT;
            """),
        // Device events (the latest of each name), how the agent knows a device's presence (`announced`,
        // `session`, `traffic`, `broker`), and the tags in a device's information.
        Migration(version: 11, name: "device events, presence source, tags", sql: """
            CREATE TABLE device_events (
                dev_id TEXT NOT NULL REFERENCES devices(dev_id) ON DELETE CASCADE,
                name   TEXT NOT NULL,
                params TEXT NOT NULL,
                time   INTEGER NOT NULL,
                PRIMARY KEY (dev_id, name)
            ) WITHOUT ROWID;
            ALTER TABLE devices ADD COLUMN presence TEXT;
            ALTER TABLE devices ADD COLUMN tags TEXT;
            """),
        // The dialect a pairing is for (NULL: native; 'alink'): the broker user, client id and topics its device
        // gets. A provisioned device's is its pairing's (`provisioned_devices.pairing`); a sub-device's pairing
        // takes its gateway's.
        Migration(version: 12, name: "a pairing's dialect", sql: """
            ALTER TABLE pairings ADD COLUMN dialect TEXT;
            """),
        // What the daemon gave Home Assistant (docs/home-assistant.md): each retained discovery config, the
        // components in it (a component dropped later is removed by name), a digest of the payload (an unchanged
        // config is not sent again at the next start), and the state topics to clear with it. Emptied when the
        // feature is turned off or the device removed, once Home Assistant was told.
        Migration(version: 13, name: "Home Assistant discovery", sql: """
            CREATE TABLE home_assistant (
                config_topic TEXT PRIMARY KEY,
                dev_id       TEXT,
                state_prefix TEXT,
                components   TEXT NOT NULL,
                digest       INTEGER NOT NULL
            ) WITHOUT ROWID;
            """),
        // The wire dialect a device speaks when its id does not say (a TuyaLink device): requests go out in it.
        Migration(version: 14, name: "a device's dialect", sql: """
            ALTER TABLE devices ADD COLUMN dialect TEXT;
            """),
    ]

    /// A connection of its own to the cache file, migrated unless `readOnly` (a reader must not migrate).
    /// A reader's check instead of migrating: a file from before the latest migration lacks tables or columns
    /// the reader would ask for, so it gets a clear error rather than an SQL one.
    static package func requireCurrent(_ database: Database) throws {
        let version = try database.userVersion
        if version < migrations.count { throw CacheError.schemaTooOld(path: database.path, version: version) }
    }

    package static func open(_ path: String, readOnly: Bool) throws -> Database {
        var options = Database.Options()
        options.readOnly = readOnly
        let database = try Database(path: path, options: options)
        if !readOnly { _ = try Migrator(migrations).migrate(database) }
        return database
    }

    /// Columns of `devices` that are not info fields, in the order `CacheStore` binds them.
    static package let stateColumns = [
        "info_time", "online", "status_time", "status_changed_at", "wifi_signal_time", "rsrp_time",
        "first_seen", "updated_at", "presence",
    ]

    static package var deviceColumns: [String] { ["dev_id"] + DeviceInfo.fields.map(\.column) + stateColumns }

    /// `deviceColumns` as SQL, `dev_id, name, …`. Joined by hand: the standard library's unspecialized
    /// `joined(separator:)` looked up its associated types at run time, a cost a short `info` paid at start.
    static package var deviceColumnList: String {
        deviceColumns.reduce(into: "") { list, column in
            if !list.isEmpty { list += ", " }
            list += column
        }
    }

    /// Deletes everything the file keeps about a device: its cached row (properties and transfer go with it by
    /// cascade, and so do its events), the local tables of migration 3, its scene actions and link memberships (`RemovalMoves`), the
    /// upgrades of migration 5 and the provisioned device of migration 7, which have no foreign keys to cascade from.
    static package func deleteDevice(_ id: String, in db: Database) throws -> Bool {
        try db.transaction(.immediate) {
            try db.run("DELETE FROM devices WHERE dev_id = ?", [.text(id)])
            let existed = db.changes > 0
            try db.run("DELETE FROM device_meta WHERE dev_id = ?", [.text(id)])
            try RemovalMoves.forget(id, now: Timestamp.now(), in: db)
            try db.run("DELETE FROM backup_networks WHERE dev_id = ?", [.text(id)])
            try db.run("DELETE FROM ota_upgrades WHERE dev_id = ?", [.text(id)])
            try db.run("DELETE FROM provisioned_devices WHERE dev_id = ?", [.text(id)])
            return existed
        }
    }
}
