import SQLite

/// Reads of the local tables (migrations 3 and 6: device metadata, links) on a connection the caller holds: the
/// cache's readers and moves use them, and `LocalStore` (which also changes those tables) reads through them.
package enum LocalTables {
    static package func metadata(_ id: String, in db: Database) throws -> DeviceMetadata {
        guard let row = try db.query(
            "SELECT name, room, icon, offline_warning, updated_at FROM device_meta WHERE dev_id = ?", [.text(id)]
        ).first else { return DeviceMetadata() }
        return metadata(row)
    }

    static package func allMetadata(in db: Database) throws -> [String: DeviceMetadata] {
        var all: [String: DeviceMetadata] = [:]
        for row in try db.query("SELECT dev_id, name, room, icon, offline_warning, updated_at FROM device_meta") {
            guard let id = row.string("dev_id") else { continue }
            all[id] = metadata(row)
        }
        return all
    }

    private static func metadata(_ row: Row) -> DeviceMetadata {
        DeviceMetadata(name: row.string("name"), room: row.string("room"), icon: row.string("icon"),
                       offlineWarning: (row.int("offline_warning") ?? 1) != 0, updatedAt: row.int("updated_at"))
    }

    static package func links(_ db: Database, where condition: String?, _ bindings: [SQLiteValue]) throws -> [DeviceLink] {
        let rows = try db.query("""
            SELECT l.name AS name, l.created_at AS created_at, m.dev_id AS dev_id, m.code AS code
            FROM device_links l LEFT JOIN link_members m ON m.link = l.name
            \(condition.map { "WHERE \($0)" } ?? "") ORDER BY l.name, m.position
            """, bindings)
        var links: [DeviceLink] = []
        for row in rows {
            let name = row.string("name") ?? ""
            if links.last?.name != name {
                links.append(DeviceLink(name: name, members: [], createdAt: row.int("created_at") ?? 0))
            }
            if let device = row.string("dev_id"), let code = row.string("code") {
                links[links.count - 1].members.append(DeviceLink.Member(deviceId: device, code: code))
            }
        }
        return links
    }
}
