import JSON
import SQLite

/// The local tables' part of a gateway replacement (docs/gateway-wifi-simulator.md): run by the cache writer in the
/// transaction that writes the re-linked sub-devices, so that the file never shows one without the other.
///
/// Running it again for the same replacement (a journal replay of the `finish` report) changes nothing: the faulty
/// gateway is named nowhere any more, and the record's key is the pair and the finish's time.
package enum ReplacementMoves {
    /// `models`: the thing models the moved link members are checked against again (those of the new gateway's
    /// product, as the file names it).
    static package func move(from old: String, to new: String, time: Millis, now: Millis, models: CurrentModels,
                     in db: Database) throws -> GatewayReplacement {
        // A replay: the first run moved everything, and its record says what.
        if let recorded = try replacement(old: old, new: new, time: time, db) { return recorded }
        var moved = GatewayReplacement(old: old, new: new, time: time, recordedAt: now)
        moved.groups = try moveGroups(old, new, db)
        moved.scenes = try moveScenes(old, new, now, db)
        (moved.links, moved.droppedLinkMembers, moved.dissolvedLinks) = try moveLinks(old, new, models, db)
        moved.fields = try moveMetadata(old, new, now, db)
        try db.run("DELETE FROM backup_networks WHERE dev_id = ?", [.text(old)])
        try db.run("DELETE FROM offline_alerts WHERE dev_id = ?", [.text(old)])
        // With provisioning, the sub-devices the old gateway activated (or took over) are the new one's: their
        // broker topics follow this record, never a `gatewayId` an info report names.
        try db.run("UPDATE provisioned_devices SET gateway_id = ? WHERE gateway_id = ?", [.text(new), .text(old)])
        try db.run("""
            INSERT INTO gateway_replacements (old_id, new_id, time, moved, recorded_at) VALUES (?, ?, ?, ?, ?)
            """, [.text(old), .text(new), .integer(time), .text(JSONValue.object(moved.moved).serialized()),
                  .integer(now)])
        return moved
    }

    /// The new gateway takes the old one's place once in each group: where it is a member already, the old
    /// membership just goes.
    private static func moveGroups(_ old: String, _ new: String, _ db: Database) throws -> [String] {
        let names = try db.query("""
            SELECT g.name AS name FROM device_groups g JOIN group_members m ON m.group_id = g.group_id
            WHERE m.dev_id = ? ORDER BY g.name
            """, [.text(old)]).compactMap { $0.string("name") }
        try db.run("UPDATE OR IGNORE group_members SET dev_id = ? WHERE dev_id = ?", [.text(new), .text(old)])
        try db.run("DELETE FROM group_members WHERE dev_id = ?", [.text(old)])
        return names
    }

    /// Every scene action for the old gateway now sets the new one (same product, so the same codes). A scene
    /// that had an action for the new gateway already keeps that one, in its place, with the old action's codes
    /// added where it had none (its own values win): `scene run` sends the gateway one set, not two that disagree.
    private static func moveScenes(_ old: String, _ new: String, _ now: Millis, _ db: Database) throws -> [String] {
        try SceneActions.rewriteScenes(in: db, now: now) { actions in
            let device = { (action: JSONValue) in action["device"]?.stringValue }
            guard actions.contains(where: { device($0) == old }) else { return actions }
            guard let mine = actions.firstIndex(where: { device($0) == new }) else {
                return actions.map { action in
                    guard device(action) == old, var object = action.objectValue else { return action }
                    object["device"] = .string(new)
                    return .object(object)
                }
            }
            var set = JSONObject()
            for owner in [old, new] {
                for action in actions where device(action) == owner { set.merge(action["set"]?.objectValue ?? [:]) }
            }
            var merged = actions[mine].objectValue ?? JSONObject()
            merged["set"] = .object(JSONObject(set.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
            return actions.indices.compactMap { index in
                if index == mine { return .object(merged) }
                let other = device(actions[index])
                return other == old || other == new ? nil : actions[index]
            }
        }.map(\.name)
    }

    /// Each link member on the old gateway moves to the new one (once: a member it already is stays as it is),
    /// checked again against the new gateway's model (`DeviceLink.replacing`); a link left with fewer than two
    /// members is deleted. Returns the links kept, the members dropped and the links dissolved.
    private static func moveLinks(_ old: String, _ new: String, _ models: CurrentModels, _ db: Database) throws
        -> ([String], [DroppedLinkMember], [String]) {
        let links = try LocalTables.links(db, where: "l.name IN (SELECT link FROM link_members WHERE dev_id = ?)",
                                         [.text(old)])
        let product = { (device: String) in
            try db.query("SELECT product_id FROM devices WHERE dev_id = ?", [.text(device)]).first?.string("product_id")
        }
        let newProduct = try product(new)
        let sameProduct = try newProduct == product(old)
        var kept: [String] = [], dropped: [DroppedLinkMember] = [], dissolved: [String] = []
        for link in links {
            let (next, refused) = link.replacing(old, by: new, sameProduct: sameProduct) { device in
                models.model(for: device == new ? newProduct : (try? product(device)) ?? nil)
            }
            dropped += refused
            try db.run("DELETE FROM link_members WHERE link = ?", [.text(link.name)])
            guard let next else {
                try db.run("DELETE FROM device_links WHERE name = ?", [.text(link.name)])
                dissolved.append(link.name)
                continue
            }
            for (position, member) in next.members.enumerated() {
                try db.run("INSERT INTO link_members (link, position, dev_id, code) VALUES (?, ?, ?, ?)",
                           [.text(link.name), .integer(Int64(position)), .text(member.deviceId), .text(member.code)])
            }
            kept.append(link.name)
        }
        return (kept, dropped, dissolved)
    }

    /// Name, room and icon move field by field where the new gateway has none set locally; the old gateway's
    /// local row goes either way.
    private static func moveMetadata(_ old: String, _ new: String, _ now: Millis, _ db: Database) throws -> [String] {
        guard let from = try db.query("SELECT name, room, icon FROM device_meta WHERE dev_id = ?", [.text(old)]).first
        else { return [] }
        let to = try db.query("SELECT name, room, icon FROM device_meta WHERE dev_id = ?", [.text(new)]).first
        var fields: [String] = []
        var values: [String: SQLiteValue] = [:]
        for field in ["name", "room", "icon"] {
            let mine = to?.string(field)
            if mine == nil, let theirs = from.string(field) {
                fields.append(field)
                values[field] = .text(theirs)
            } else {
                values[field] = mine.map(SQLiteValue.text) ?? .null
            }
        }
        if !fields.isEmpty {
            try db.run("""
                INSERT INTO device_meta (dev_id, name, room, icon, updated_at) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(dev_id) DO UPDATE SET name = excluded.name, room = excluded.room, icon = excluded.icon,
                updated_at = excluded.updated_at
                """, [.text(new), values["name"]!, values["room"]!, values["icon"]!, .integer(now)])
        }
        try db.run("DELETE FROM device_meta WHERE dev_id = ?", [.text(old)])
        return fields
    }

    /// The recorded replacements, latest first (all, or those of one gateway, old or new).
    static package func replacements(involving gateway: String? = nil, in db: Database) throws -> [GatewayReplacement] {
        let rows = try db.query("""
            SELECT old_id, new_id, time, moved, recorded_at FROM gateway_replacements
            \(gateway == nil ? "" : "WHERE old_id = ?1 OR new_id = ?1") ORDER BY recorded_at DESC, time DESC
            """, gateway.map { [.text($0)] } ?? [])
        return rows.compactMap(parse)
    }

    static package func replacement(old: String, new: String, time: Millis, _ db: Database) throws -> GatewayReplacement? {
        try db.query("""
            SELECT old_id, new_id, time, moved, recorded_at FROM gateway_replacements
            WHERE old_id = ? AND new_id = ? AND time = ?
            """, [.text(old), .text(new), .integer(time)]).first.flatMap(parse)
    }

    private static func parse(_ row: Row) -> GatewayReplacement? {
        guard let old = row.string("old_id"), let new = row.string("new_id"), let time = row.int("time") else {
            return nil
        }
        var object = (row.string("moved").flatMap { try? JSONParser.parse($0) })?.objectValue ?? JSONObject()
        object["old"] = .string(old)
        object["new"] = .string(new)
        object["time"] = .integer(time)
        object["recordedAt"] = .integer(row.int("recorded_at") ?? 0)
        return GatewayReplacement(json: .object(object))
    }
}
