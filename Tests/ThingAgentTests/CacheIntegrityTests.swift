import Foundation
import SQLite
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// What an operator's `PRAGMA integrity_check` says of a cache file with links in it, before and after the
/// migration that puts link_members' key columns first.
@Suite("Cache file integrity")
struct CacheIntegrityTests {
    static func integrity(_ db: Database) throws -> [String] {
        let check = try db.prepare("PRAGMA integrity_check")
        var lines: [String] = []
        while try check.step() { lines.append(check.string(0) ?? "") }
        return lines
    }

    @Test func aFileWithLinksPassesIntegrityCheckAfterTheMigrationWithItsLinksKept() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/cache.sqlite"
        // A file as the schema before migration 9 left it, with a link in it.
        let before = try Database(path: path)
        _ = try Migrator(CacheSchema.migrations.filter { $0.version < 9 }).migrate(before)
        let link = DeviceLink(name: "stairs", members: [
            DeviceLink.Member(deviceId: "lamp1", code: "switch_1"), DeviceLink.Member(deviceId: "lamp2", code: "switch_1"),
        ])
        try before.execute("INSERT INTO device_links VALUES ('stairs', 1)")
        try before.execute("""
            INSERT INTO link_members (link, position, dev_id, code)
            VALUES ('stairs', 0, 'lamp1', 'switch_1'), ('stairs', 1, 'lamp2', 'switch_1')
            """)
        #expect(try Self.integrity(before) == ["NULL value in link_members.position", "NULL value in link_members.position"],
                "SQLite no longer misreports the old table: the migration may be unneeded")
        before.close()

        let store = try LocalStore(path: path)
        #expect(try store.links().map(\.members) == [link.members])
        _ = try store.createLink(DeviceLink(name: "hall", members: [
            DeviceLink.Member(deviceId: "lamp3", code: "switch_1"), DeviceLink.Member(deviceId: "lamp1", code: "switch_2"),
        ]))
        let after = try Database(path: path)
        #expect(try Self.integrity(after) == ["ok"])
        #expect(try store.links().map(\.name) == ["hall", "stairs"])
    }
}
