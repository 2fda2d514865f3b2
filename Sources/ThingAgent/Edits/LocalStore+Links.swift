import SQLite

/// Multi-control links in the cache file's own tables (schema version 6).
extension LocalStore {
    /// Every link with its members in the order given at create, by name.
    public func links() throws -> [DeviceLink] {
        try withDatabase { db in try Self.links(db, where: nil, []) }
    }

    public func link(named name: String) throws -> DeviceLink? {
        try withDatabase { db in try Self.links(db, where: "l.name = ?", [.text(name)]).first }
    }

    /// Creates a link (a name not yet taken). The caller checked it against the thing models (`DeviceLink.check`).
    @discardableResult
    public func createLink(_ link: DeviceLink, now: Millis = Timestamp.current) throws -> DeviceLink {
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
    public func deleteLink(_ name: String) throws -> Bool {
        try withDatabase { db in
            try db.run("DELETE FROM device_links WHERE name = ?", [.text(name)])
            return db.changes > 0
        }
    }

    static func links(_ db: Database, where condition: String?, _ bindings: [SQLiteValue]) throws -> [DeviceLink] {
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
