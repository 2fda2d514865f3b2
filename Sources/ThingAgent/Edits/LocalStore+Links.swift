import SQLite
import ThingAgentCore

/// Multi-control links in the cache file's own tables (schema version 6).
extension LocalStore {
    /// Every link with its members in the order given at create, by name.
    package func links() throws -> [DeviceLink] {
        try withDatabase { db in try LocalTables.links(db, where: nil, []) }
    }

    package func link(named name: String) throws -> DeviceLink? {
        try withDatabase { db in try LocalTables.links(db, where: "l.name = ?", [.text(name)]).first }
    }

    /// Creates a link (a name not yet taken). The caller checked it against the thing models (`DeviceLink.check`).
    @discardableResult
    package func createLink(_ link: DeviceLink, now: Millis = Timestamp.current) throws -> DeviceLink {
        try withDatabase { db in
            try db.transaction(.immediate) {
                if try db.scalar("SELECT 1 FROM device_links WHERE name = ?", [.text(link.name)]) != nil {
                    throw EditError.linkExists(link.name)
                }
                try db.run("INSERT INTO device_links (name, created_at) VALUES (?, ?)", [.text(link.name), .integer(now)])
                for (position, member) in link.members.enumerated() {
                    try db.run("INSERT INTO link_members (link, position, dev_id, code) VALUES (?, ?, ?, ?)",
                               [.text(link.name), .integer(Int64(position)), .text(member.deviceId), .text(member.code)])
                }
            }
        }
        return DeviceLink(name: link.name, members: link.members, createdAt: now)
    }

    /// Deletes a link; false when there was none of that name.
    @discardableResult
    package func deleteLink(_ name: String) throws -> Bool {
        try withDatabase { db in
            try db.run("DELETE FROM device_links WHERE name = ?", [.text(name)])
            return db.changes > 0
        }
    }
}
