import SQLite
import ThingAgentCore

/// A standby instance's writes of what the active one's records say (`GroupReplica`): each sets one key of the
/// local tables to the value given (nil deletes it), whatever it held before.
extension LocalStore {
    /// The device's metadata exactly as given, its times included; nil deletes the row (the defaults show again).
    package func setMetadata(_ id: String, _ meta: DeviceMetadata?) throws {
        try withDatabase { db in
            guard let meta else {
                try db.run("DELETE FROM device_meta WHERE dev_id = ?", [.text(id)])
                return
            }
            try db.run("""
                INSERT INTO device_meta (dev_id, name, room, icon, offline_warning, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(dev_id) DO UPDATE SET name = excluded.name, room = excluded.room, icon = excluded.icon,
                offline_warning = excluded.offline_warning, updated_at = excluded.updated_at
                """, [.text(id), Self.text(meta.name), Self.text(meta.room), Self.text(meta.icon),
                      .integer(meta.offlineWarning ? 1 : 0), .integer(meta.updatedAt ?? Timestamp.current)])
        }
    }

    /// The device's backup networks exactly as given (passwords included).
    package func setBackupNetworks(_ id: String, _ networks: [BackupNetwork]) throws {
        try withDatabase { db in
            try db.transaction(.immediate) {
                try db.run("DELETE FROM backup_networks WHERE dev_id = ?", [.text(id)])
                for network in networks {
                    try db.run("""
                        INSERT INTO backup_networks (dev_id, ssid, password, priority, added_at) VALUES (?, ?, ?, ?, ?)
                        """, [.text(id), .text(network.ssid), Self.text(network.password),
                              .integer(Int64(network.priority)), .integer(network.addedAt)])
                }
            }
        }
    }

    /// The group of that name as given, its members and creation time included; nil deletes it.
    package func setGroup(_ name: String, _ group: DeviceGroup?) throws {
        try deleteGroup(name)
        if let group { try createGroup(name, devices: group.devices, now: group.createdAt) }
    }

    /// The scene of that name as given; nil deletes it.
    package func setScene(_ name: String, _ scene: Scene?) throws {
        guard let scene else {
            try deleteScene(name)
            return
        }
        try saveScene(scene, replacing: try self.scene(named: name) != nil)
    }

    /// The link of that name as given, its creation time included; nil deletes it.
    package func setLink(_ name: String, _ link: DeviceLink?) throws {
        try deleteLink(name)
        if let link { try createLink(link, now: link.createdAt) }
    }
}
