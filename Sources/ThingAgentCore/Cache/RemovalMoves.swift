import JSON
import SQLite

/// The local tables' part of removing a device, run in the transaction that deletes its rows
/// (`CacheSchema.deleteDevice`), so that no group, scene or link names a device the file no longer has.
package enum RemovalMoves {
    /// What removing `device` takes it out of, without changing anything (the CLI's report before the removal).
    static package func references(of device: String, in db: Database) throws -> DeviceRemoval {
        try forget(device, now: 0, in: db, change: false)
    }

    /// Takes `device` out of every group, scene action and link; deletes the scenes left with no action and the
    /// links left with fewer than two members.
    @discardableResult
    static package func forget(_ device: String, now: Millis, in db: Database, change: Bool = true) throws -> DeviceRemoval {
        var removal = DeviceRemoval(device: device)
        removal.groups = try db.query("""
            SELECT g.name AS name FROM device_groups g JOIN group_members m ON m.group_id = g.group_id
            WHERE m.dev_id = ? ORDER BY g.name
            """, [.text(device)]).compactMap { $0.string("name") }
        if change { try db.run("DELETE FROM group_members WHERE dev_id = ?", [.text(device)]) }

        for (name, remaining) in try SceneActions.rewrite(in: db, now: now, change: change, { action in
            action["device"]?.stringValue == device ? nil : action
        }) {
            if remaining.isEmpty {
                removal.deletedScenes.append(name)
                if change { try db.run("DELETE FROM scenes WHERE name = ?", [.text(name)]) }
            } else {
                removal.scenes.append(name)
            }
        }

        let links = try db.query("""
            SELECT link, (SELECT COUNT(*) FROM link_members o WHERE o.link = m.link AND o.dev_id <> ?1) AS others
            FROM link_members m WHERE m.dev_id = ?1 GROUP BY link ORDER BY link
            """, [.text(device)])
        for row in links {
            guard let name = row.string("link") else { continue }
            if (row.int("others") ?? 0) < 2 {
                removal.deletedLinks.append(name)
                if change { try db.run("DELETE FROM device_links WHERE name = ?", [.text(name)]) }
            } else {
                removal.links.append(name)
            }
        }
        if change { try db.run("DELETE FROM link_members WHERE dev_id = ?", [.text(device)]) }
        return removal
    }
}

/// Scene actions rewritten in place, one scene at a time (a replacement re-targets them, a removal drops them).
package enum SceneActions {
    /// Passes every action of every scene through `transform` (nil drops the action); writes the scenes that
    /// changed (when `change`) and returns each of them, by name, with the actions it has left.
    static package func rewrite(in db: Database, now: Millis, change: Bool = true,
                        _ transform: (JSONObject) -> JSONObject?) throws -> [(name: String, actions: [JSONValue])] {
        try rewriteScenes(in: db, now: now, change: change) { actions in
            actions.compactMap { action in
                guard let object = action.objectValue else { return action }
                return transform(object).map(JSONValue.object)
            }
        }
    }

    /// Passes each scene's whole list of actions through `transform`; writes and returns the scenes as
    /// `rewrite` does.
    static package func rewriteScenes(in db: Database, now: Millis, change: Bool = true,
                              _ transform: ([JSONValue]) -> [JSONValue]) throws -> [(name: String, actions: [JSONValue])] {
        var rewritten: [(name: String, actions: [JSONValue])] = []
        for row in try db.query("SELECT name, actions FROM scenes ORDER BY name") {
            guard let name = row.string("name"), let text = row.string("actions"),
                  let actions = (try? JSONParser.parse(text))?.arrayValue else { continue }
            let kept = transform(actions)
            guard kept != actions else { continue }
            if change, !kept.isEmpty {
                try db.run("UPDATE scenes SET actions = ?, updated_at = ? WHERE name = ?",
                           [.text(JSONValue.array(kept).serialized()), .integer(now), .text(name)])
            }
            rewritten.append((name, kept))
        }
        return rewritten
    }
}
