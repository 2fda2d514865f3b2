import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `info` and `devices` read the cache file on one read-only connection, without migrating it and without the
/// async runtime or the MQTT libraries: what a user sees of that is the output, the errors for a file they cannot
/// read, and (with strace) what the process does.
@Suite("info and devices read the cache file")
struct CacheReadCommandsTests {
    /// A cache file written by the agent's own store: a lamp with local metadata, a status change, a running
    /// upgrade and property codes longer than `info`'s 16-column label.
    static func makeCache(_ directory: String) async throws -> String {
        let path = directory + "/cache.sqlite"
        let store = try CacheStore(path: path)
        let t0: Millis = 1_764_450_000_000
        var lamp = DeviceSnapshot(id: "lamp1", seenAt: t0)
        _ = try lamp.apply(.info(["name": "Hall light", "productId": "p1", "firmwareVersion": "1.4.2"], time: t0), now: t0)
        _ = try lamp.apply(.status(online: true, time: t0 + 1000), now: t0 + 1000)
        _ = try lamp.apply(.properties([
            (code: "switch_1", value: PropertyValue(value: true, time: t0)),
            (code: "countdown_switch_1", value: PropertyValue(value: 300, time: t0)),
            (code: "countdown_switch_2", value: PropertyValue(value: 600, time: t0)),
        ]), now: t0)
        try store.database.transaction {
            try store.write(lamp, row: true, properties: lamp.properties.keys, transfer: false)
        }
        try LocalStore(path: path).edit("lamp1", DeviceEdit(name: "Lamp", room: "hall", offlineWarning: false))
        try await Self.write(path, """
            INSERT INTO ota_upgrades (dev_id, from_version, version, url, sha256, size, stage, progress, started_at,
                                      updated_at)
            VALUES ('lamp1', '1.4.2', '1.5.0', 'https://example.invalid/f.bin', 'ab', 100, 'downloading', 40, \(t0), \(t0))
            """)
        return path
    }

    /// Runs `sql` with the `sqlite3` shell, writing (the helper `sqlite3` only reads).
    static func write(_ path: String, _ sql: String) async throws {
        let result = try await runCommand("/usr/bin/sqlite3", ["-bail", "-cmd", ".timeout 5000", path, sql])
        try #require(result.status == 0, "\(result.stderr)")
    }

    @Test(.timeLimit(.minutes(1)))
    func infoShowsTheDeviceItsMetadataAndItsUpgradeWithEveryCodeWhole() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.makeCache(directory)
        let text = try await runCommand(thingAgentExecutable(), ["info", "lamp1", "--db", path])
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == #"Device lamp1  "Lamp""#)
        #expect(lines.contains("  local            room hall, icon -, offline warning off"))
        // The status change as a UTC date: 1764450001 s is 2025-11-29T21:00:01.
        #expect(lines.contains { $0.hasPrefix("  status           online since 2025-11-29T21:00:01 (") }, "\(lines)")
        #expect(lines.contains("  firmwareVersion  1.4.2"))
        // Codes longer than the label column are printed whole (they were cut to 16 characters, so that two codes
        // could read as one).
        #expect(lines.contains { $0.hasPrefix("  countdown_switch_1 300  (") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("  countdown_switch_2 600  (") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("  switch_1         true  (") }, "\(lines)")
        #expect(lines.last?.hasPrefix("  firmware upgrade 1.4.2 → 1.5.0: downloading 40%, running, started ") == true)

        let json = try await runCommand(thingAgentExecutable(), ["info", "lamp1", "--db", path, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try JSONParser.parse(json.stdout)
        #expect(object["devId"] == "lamp1")
        #expect(object["properties"]?["countdown_switch_2"] == 600)
        #expect(object["upgrade"]?["progress"] == 40)
        #expect(object["upgrade"]?["version"] == "1.5.0")

        let list = try await runCommand(thingAgentExecutable(), ["devices", "--db", path])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.split(separator: "\n").first == "ID     NAME  ROOM  CATEGORY  STATUS  WIFI  PROPS  UPDATED")
        #expect(list.stdout.hasSuffix("\n1 device\n"))
    }

    /// `devices` reads eight columns of each row rather than whole snapshots: each column says what the snapshot
    /// and the local tables say (local name over the device's own, none when there is neither, the room, Wi-Fi
    /// with its level), in id order, and --offline, --gateway and --room pick the same devices in both forms.
    @Test(.timeLimit(.minutes(1)))
    func devicesListsWhatTheSnapshotsSay() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.makeCache(directory)
        let store = try CacheStore(path: path)
        let t0: Millis = 1_764_450_000_000
        var plug = DeviceSnapshot(id: "plug2", seenAt: t0)
        _ = try plug.apply(.info(["name": "Plug", "category": "gateway", "gatewayId": "gw9"], time: t0), now: t0)
        _ = try plug.apply(.status(online: false, time: t0), now: t0)
        _ = try plug.apply(.signal(wifi: SignalReading(dBm: -71, time: t0), rsrp: nil), now: t0)
        let bare = DeviceSnapshot(id: "a-bare", seenAt: t0)
        try store.database.transaction {
            for device in [plug, bare] { try store.write(device, row: true, properties: [], transfer: false) }
        }
        _ = try LocalStore(path: path).edit("plug2", DeviceEdit(room: "Hall"))
        let snapshots = try CacheReader(path: path).devices()
        #expect(snapshots.map(\.id) == ["a-bare", "lamp1", "plug2"])
        #expect(snapshots.map { $0.info.category?.rawValue } == [nil, nil, "gateway"])

        let list = try await runCommand(thingAgentExecutable(), ["devices", "--db", path])
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n").map { $0.replacing(/\d+ (s|min|h|d) ago/, with: "AGE") }
        #expect(lines == [
            "ID      NAME  ROOM  CATEGORY  STATUS   WIFI     PROPS  UPDATED",
            "a-bare                        unknown           0      AGE",
            "lamp1   Lamp  hall            online            3      AGE",
            "plug2   Plug  Hall  gateway   offline  -71 dBm  0      AGE",
            "3 devices",
        ])
        // The room matches exactly: lamp1's "hall" is another room.
        let hall = try await runCommand(thingAgentExecutable(), ["devices", "--db", path, "--room", "Hall"])
        #expect(hall.status == 0, "\(hall.stderr)")
        #expect(hall.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ").first } == ["plug2", "1"],
                "\(hall.stdout)")
        let hallJSON = try await runCommand(thingAgentExecutable(), ["devices", "--db", path, "--room", "Hall", "--json"])
        #expect(try JSONParser.parse(hallJSON.stdout).arrayValue?.map { $0["devId"] } == ["plug2"], "\(hallJSON.stdout)")
        let nobody = try await runCommand(thingAgentExecutable(), ["devices", "--db", path, "--room", "Attic"])
        #expect(nobody.status == 0)
        #expect(nobody.stdout.hasSuffix("\n0 devices\n"), "\(nobody.stdout)")
        let offline = try await runCommand(thingAgentExecutable(), ["devices", "--db", path, "--offline"])
        #expect(offline.stdout.split(separator: "\n").dropFirst().first?.hasPrefix("plug2 ") == true, "\(offline.stdout)")
        #expect(offline.stdout.hasSuffix("\n1 device\n"))
        let gateway = try await runCommand(thingAgentExecutable(), ["devices", "--db", path, "--gateway", "gw9"])
        #expect(gateway.stdout.split(separator: "\n").count == 3, "\(gateway.stdout)")
        #expect(gateway.stdout.contains("plug2"))
    }

    /// A file from before the latest schema is refused with the error that says what to do, and left as it was:
    /// the readers never migrate (the daemon does, holding the cache lock).
    @Test(.timeLimit(.minutes(1)), arguments: [["info", "lamp1"], ["devices"], ["info", "lamp1", "--json"]])
    func anOlderSchemaIsRefusedClearlyAndNotMigrated(_ command: [String]) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.makeCache(directory)
        let latest = try #require(Int(try await sqlite3(path, "PRAGMA user_version")))
        try await Self.write(path, "PRAGMA user_version = \(latest - 1)")
        let result = try await runCommand(thingAgentExecutable(), command + ["--db", path])
        #expect(result.status == 1)
        #expect(result.stderr.contains(
            "cannot read the cache \(path): the cache \(path) has schema version \(latest - 1); run the agent once to upgrade it"),
            "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(try await sqlite3(path, "PRAGMA user_version") == "\(latest - 1)")
    }

    /// An SQLite file without the cache's tables (schema version 0), a file that is no database, and no file.
    @Test(.timeLimit(.minutes(1)))
    func aFileWithoutTheTablesOrNoDatabaseOrNoFileGetsAClearError() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let empty = directory + "/empty.sqlite"
        try await Self.write(empty, "CREATE TABLE unrelated (x)")
        let garbage = directory + "/garbage.sqlite"
        try "not a database, but long enough to be read as a header by SQLite: \(String(repeating: "x", count: 200))"
            .write(toFile: garbage, atomically: true, encoding: .utf8)
        for command in [["info", "lamp1"], ["devices"]] {
            let noTables = try await runCommand(thingAgentExecutable(), command + ["--db", empty])
            #expect(noTables.status == 1)
            #expect(noTables.stderr.contains("has schema version 0; run the agent once to upgrade it"), "\(noTables.stderr)")
            let notADatabase = try await runCommand(thingAgentExecutable(), command + ["--db", garbage])
            #expect(notADatabase.status == 1)
            #expect(notADatabase.stderr.contains("cannot read the cache \(garbage)"), "\(notADatabase.stderr)")
            #expect(notADatabase.stderr.contains("not a database"), "\(notADatabase.stderr)")
            let missing = try await runCommand(thingAgentExecutable(), command + ["--db", directory + "/none.sqlite"])
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("no cache at \(directory)/none.sqlite"), "\(missing.stderr)")
        }
        #expect(try await sqlite3(empty, "PRAGMA user_version") == "0", "the reader migrated the file")
    }

    /// `info` starts no thread (no async runtime), opens the cache file once, and loads neither libmosquitto nor
    /// OpenSSL: strace lists what the process does.
    @Test(.timeLimit(.minutes(1)))
    func infoStartsNoThreadOpensTheCacheOnceAndLoadsNoMQTTLibrary() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try await Self.makeCache(directory)
        let trace = directory + "/trace"
        let result = try await runCommand("/usr/bin/strace", [
            "-f", "-qq", "-o", trace, "-e", "trace=clone,clone3,fork,vfork,open,openat",
            thingAgentExecutable(), "info", "lamp1", "--db", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Device lamp1"))
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        #expect(!lines.contains { $0.contains("clone") || $0.contains("fork(") }, "\(lines.filter { $0.contains("clone") })")
        // SQLite opens the file under its normalised path; the -wal and -shm files have names of their own.
        #expect(lines.filter { $0.contains("/cache.sqlite\"") }.count == 1, "\(lines.filter { $0.contains("cache") })")
        #expect(!lines.contains { $0.contains("libmosquitto") || $0.contains("libssl") || $0.contains("libcrypto") },
                "\(lines.filter { $0.contains("lib") && !$0.contains("ENOENT") })")
    }
}
