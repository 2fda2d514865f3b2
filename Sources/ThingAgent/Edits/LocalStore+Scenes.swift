import JSON
import SQLite
import ThingAgentCore

/// What importing the scenes file did (`LocalStore.importScenes`).
public struct SceneImport: Sendable, Equatable {
    /// New scenes taken from the file.
    public var imported: [String] = []
    /// Scenes the file changed that nobody had changed in the cache since the last import.
    public var updated: [String] = []
    /// Scenes the file changed that were changed or deleted in the cache since: the cache's version stays.
    public var kept: [String] = []
    /// Of `kept`, those deleted in the cache since they were imported: they stay deleted.
    public var deleted: [String] = []
}

/// Scenes in the cache file's own table (schema version 6); `scene_imports` remembers the scenes file's part.
extension LocalStore {
    /// Every scene, by name.
    package func scenes() throws -> [Scene] {
        try withDatabase { db in
            try db.query("SELECT name, description, actions FROM scenes ORDER BY name").compactMap(Self.scene)
        }
    }

    package func scene(named name: String) throws -> Scene? {
        try withDatabase { db in
            try db.query("SELECT name, description, actions FROM scenes WHERE name = ?", [.text(name)])
                .first.flatMap(Self.scene)
        }
    }

    /// The names of the scenes ever imported from the scenes file (deleted or not since).
    package func importedSceneNames() throws -> Set<String> {
        try withDatabase { db in Set(try db.query("SELECT name FROM scene_imports").compactMap { $0.string("name") }) }
    }

    /// Creates a scene (`replacing: false`, a name not yet taken) or replaces one that exists (`replacing: true`).
    /// The caller checked its values against the thing models (`Scene.check`).
    @discardableResult
    package func saveScene(_ scene: Scene, replacing: Bool, now: Millis = Timestamp.current) throws -> Scene {
        try withDatabase { db in
            try db.transaction(.immediate) {
                let exists = try db.scalar("SELECT 1 FROM scenes WHERE name = ?", [.text(scene.name)]) != nil
                if exists && !replacing { throw EditError.sceneExists(scene.name) }
                if !exists && replacing { throw EditError.unknownScene(scene.name) }
                try Self.write(scene, now: now, db)
            }
        }
        return scene
    }

    /// Deletes a scene; false when there was none of that name. A scene from the scenes file stays deleted.
    @discardableResult
    package func deleteScene(_ name: String) throws -> Bool {
        try withDatabase { db in
            try db.run("DELETE FROM scenes WHERE name = ?", [.text(name)])
            return db.changes > 0
        }
    }

    /// Imports the scenes of the scenes file `path`, never silently overwriting the cache: a scene the file gives
    /// for the first time is added; one the file gives as it did at the last import is left alone (also when it
    /// was changed or deleted in the cache since); one the file changed replaces the cached scene only when that
    /// is still what the file gave last time, and is otherwise kept out (and reported as kept).
    package func importScenes(_ scenes: Scenes, from path: String, now: Millis = Timestamp.current) throws -> SceneImport {
        try withDatabase { db in
            try db.transaction(.immediate) {
                var report = SceneImport()
                for scene in scenes.all {
                    let given = scene.json.serialized()
                    let last = try db.scalar("SELECT scene FROM scene_imports WHERE name = ?", [.text(scene.name)])
                    if case .text(let previous)? = last, previous == given { continue }
                    let cached = try db.query("SELECT name, description, actions FROM scenes WHERE name = ?",
                                              [.text(scene.name)]).first.flatMap(Self.scene)
                    if let cached {
                        guard case .text(let previous)? = last, cached.json.serialized() == previous else {
                            if cached != scene { report.kept.append(scene.name) }
                            try Self.remember(scene, given, path, now, db)
                            continue
                        }
                        try Self.write(scene, now: now, db)
                        report.updated.append(scene.name)
                    } else if last != nil {
                        // Imported before and deleted since: the user's delete stands.
                        report.kept.append(scene.name)
                        report.deleted.append(scene.name)
                    } else {
                        try Self.write(scene, now: now, db)
                        report.imported.append(scene.name)
                    }
                    try Self.remember(scene, given, path, now, db)
                }
                return report
            }
        }
    }

    private static func remember(_ scene: Scene, _ given: String, _ path: String, _ now: Millis, _ db: Database) throws {
        try db.run("""
            INSERT INTO scene_imports (name, scene, file, imported_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(name) DO UPDATE SET scene = excluded.scene, file = excluded.file, imported_at = excluded.imported_at
            """, [.text(scene.name), .text(given), .text(path), .integer(now)])
    }

    private static func write(_ scene: Scene, now: Millis, _ db: Database) throws {
        let actions = JSONValue.array(scene.actions.map(\.json)).serialized()
        try db.run("""
            INSERT INTO scenes (name, description, actions, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(name) DO UPDATE SET description = excluded.description, actions = excluded.actions,
            updated_at = excluded.updated_at
            """, [.text(scene.name), text(scene.description), .text(actions), .integer(now), .integer(now)])
    }

    private static func scene(_ row: Row) -> Scene? {
        guard let name = row.string("name"), let actions = row.string("actions").flatMap({ try? JSONParser.parse($0) })
        else { return nil }
        var entry = JSONObject([("name", .string(name)), ("actions", actions)])
        if let description = row.string("description") { entry["description"] = .string(description) }
        return try? Scene(json: .object(entry))
    }

    // MARK: gateway replacements

    /// The recorded gateway replacements, latest first: all, or those where `gateway` was the old or the new one.
    package func replacements(involving gateway: String? = nil) throws -> [GatewayReplacement] {
        try withDatabase { db in try ReplacementMoves.replacements(involving: gateway, in: db) }
    }
}
