import SQLite
import Synchronization

/// The latest upgrade of each device, in memory and in the table `ota_upgrades`. The cache writer owns it and is
/// the only one that changes it (`CacheWriter+OTA.swift`); everyone else reads.
final package class OTAUpgrades: Sendable {
    private let upgrades = Mutex<[String: OTAUpgrade]>([:])

    package func upgrade(_ device: String) -> OTAUpgrade? {
        upgrades.withLock { $0[device] }
    }

    package var running: [OTAUpgrade] {
        upgrades.withLock { $0.values.filter(\.isRunning).sorted { $0.deviceId < $1.deviceId } }
    }

    /// Under the lock: `body` sees the current upgrade and gives the next (nil: no change), which `persist`
    /// writes before memory takes it, so that memory never runs ahead of the file.
    package func change(_ device: String, persist: (OTAUpgrade) throws -> Void,
                _ body: (OTAUpgrade?) throws -> OTAUpgrade?) throws -> (current: OTAUpgrade?, changed: Bool) {
        try upgrades.withLock { upgrades in
            let current = upgrades[device]
            guard let next = try body(current), next != current else { return (current, false) }
            try persist(next)
            upgrades[device] = next
            return (next, true)
        }
    }

    /// Replaces the device's upgrade by `previous` (nil: none), persisted first.
    package func restore(_ device: String, _ previous: OTAUpgrade?, persist: (OTAUpgrade?) throws -> Void) throws {
        try upgrades.withLock { upgrades in
            try persist(previous)
            upgrades[device] = previous
        }
    }

    package func forget(_ device: String) {
        upgrades.withLock { _ = $0.removeValue(forKey: device) }
    }

    package func load(_ loaded: [OTAUpgrade]) {
        upgrades.withLock { upgrades in
            for upgrade in loaded { upgrades[upgrade.deviceId] = upgrade }
        }
    }

    // MARK: SQL

    static package func write(_ upgrade: OTAUpgrade, to database: Database) throws {
        try database.run("""
            INSERT INTO ota_upgrades (dev_id, from_version, version, url, sha256, size, stage, progress, failed_code,
                                      started_at, updated_at, report_time, ended_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(dev_id) DO UPDATE SET from_version = excluded.from_version, version = excluded.version,
            url = excluded.url, sha256 = excluded.sha256, size = excluded.size, stage = excluded.stage,
            progress = excluded.progress, failed_code = excluded.failed_code, started_at = excluded.started_at,
            updated_at = excluded.updated_at, report_time = excluded.report_time, ended_at = excluded.ended_at
            """, [
                .text(upgrade.deviceId), upgrade.fromVersion.map(SQLiteValue.text) ?? .null,
                .text(upgrade.image.version), .text(upgrade.image.url), .text(upgrade.image.sha256),
                upgrade.image.size.map(SQLiteValue.integer) ?? .null, .text(upgrade.stage.rawValue),
                .integer(Int64(upgrade.progress)), .text(upgrade.failedCode), .integer(upgrade.startedAt),
                .integer(upgrade.updatedAt), .integer(upgrade.reportTime), upgrade.endedAt.map(SQLiteValue.integer) ?? .null,
            ])
    }

    /// Every row, or one device's (`device`).
    static package func read(_ database: Database, device: String? = nil) throws -> [OTAUpgrade] {
        let rows = try device.map { try database.query("SELECT * FROM ota_upgrades WHERE dev_id = ?", [.text($0)]) }
            ?? database.query("SELECT * FROM ota_upgrades ORDER BY dev_id")
        return rows.compactMap { row in
            guard let id = row.string("dev_id"), let version = row.string("version"), let url = row.string("url"),
                  let sha256 = row.string("sha256"), let stage = row.string("stage").flatMap(OTAStage.init) else {
                return nil
            }
            return OTAUpgrade(
                deviceId: id, fromVersion: row.string("from_version"),
                image: FirmwareCatalog.Image(version: version, url: url, sha256: sha256, size: row.int("size")),
                stage: stage, progress: Int(row.int("progress") ?? 0), failedCode: row.string("failed_code") ?? "",
                startedAt: row.int("started_at") ?? 0, updatedAt: row.int("updated_at") ?? 0,
                reportTime: row.int("report_time") ?? 0, endedAt: row.int("ended_at"))
        }
    }
}
