/// Firmware-upgrade changes: the start a device accepted, its progress reports, the info report that ends it, and
/// the end of an upgrade that stalled. Each is one SQLite transaction of its own, committed before memory takes it
/// (upgrades are few and slow, so they skip the batching of the receive path), then the watches hear it.
extension CacheWriter {
    /// Puts back the upgrade `recordUpgradeStart` replaced (nil: none), when the start was refused or not sent.
    package func restoreUpgrade(device: String, _ previous: OTAUpgrade?) throws {
        try upgrades.restore(device, previous) { previous in
            try store.withLock { store in
                guard let store else { return }
                try store.database.transaction(.immediate) {
                    if let previous {
                        try OTAUpgrades.write(previous, to: store.database)
                    } else {
                        try store.database.run("DELETE FROM ota_upgrades WHERE dev_id = ?", [.text(device)])
                    }
                }
            }
        }
        // With no previous upgrade, the stall watch's clock for the device finds nothing when due and is dropped.
        if let previous { watches.upgradeChanged(previous) }
    }

    /// A start refused because the device's upgrade is still running: replacing its record would lose it.
    package struct UpgradeInProgress: Error {
        package let upgrade: OTAUpgrade
    }

    /// Records that `device` is asked to install `image`: a new upgrade in stage `accepted`. Recorded before
    /// `ota/start` is sent, so a progress report that follows the answer at once finds it. Throws
    /// `UpgradeInProgress` while the device's upgrade runs: checked under the same lock as the change, so of two
    /// starts at once exactly one is recorded.
    @discardableResult
    package func recordUpgradeStart(device: String, from version: String?, image: FirmwareCatalog.Image,
                            now: Millis) throws -> OTAUpgrade? {
        try changeUpgrade(device) { current in
            if let current, current.isRunning { throw UpgradeInProgress(upgrade: current) }
            return OTAUpgrade(deviceId: device, fromVersion: version, image: image, stage: .accepted, progress: 0,
                       failedCode: "", startedAt: now, updatedAt: now, reportTime: 0, endedAt: nil)
        }
    }

    /// Applies a progress report to the device's running upgrade of the same version; a report of another
    /// version, an older report, or one for an upgrade that ended changes nothing.
    @discardableResult
    package func applyUpgradeProgress(_ report: OTAProgressReport, device: String, now: Millis) throws -> OTAUpgrade? {
        try changeUpgrade(device) { current in
            // An empty version is a dialect's report that names none (Alink's): it is the running upgrade's.
            guard var upgrade = current, upgrade.isRunning,
                  report.version.isEmpty || upgrade.image.version == report.version,
                  report.time >= upgrade.reportTime else { return nil }
            if upgrade.stage == report.stage, upgrade.progress == report.progress { return nil }
            upgrade.stage = report.stage
            upgrade.progress = report.progress
            upgrade.reportTime = report.time
            upgrade.updatedAt = now
            if report.stage == .failed {
                upgrade.failedCode = report.failedCode
                upgrade.endedAt = now
            }
            return upgrade
        }
    }

    /// The device reported `version` in an info report of device time `time`: the target ends its upgrade as
    /// succeeded; any other version after `rebooting` ends it as failed (`rollback`); before the reboot it changes
    /// nothing. Info is retained on the broker, so every subscribe (a daemon restart, a lost session) replays the
    /// info the device published before its reboot: a report not newer than the upgrade's latest progress report
    /// is that replay, not the device's word after the reboot, and changes nothing. The start (`startedAt`) is
    /// agent time and is not compared: a device clock running behind would then never end its upgrade.
    @discardableResult
    package func applyFirmwareReport(_ version: String, at time: Millis, device: String, now: Millis) throws -> OTAUpgrade? {
        try changeUpgrade(device) { current in
            guard var upgrade = current, upgrade.isRunning else { return nil }
            let isTarget = version == upgrade.image.version
                || FirmwareVersion(version) == FirmwareVersion(upgrade.image.version)
            // The target version in the same millisecond as the last progress report is the device's word too:
            // a dialect without device times (Alink) stamps both with their arrival, often the same millisecond.
            guard time > upgrade.reportTime || (isTarget && time == upgrade.reportTime) else { return nil }
            if isTarget {
                upgrade.stage = .succeeded
                upgrade.progress = 100
            } else if upgrade.stage == .rebooting {
                upgrade.stage = .failed
                upgrade.failedCode = Self.rollbackFailedCode
            } else {
                return nil
            }
            upgrade.updatedAt = now
            upgrade.endedAt = now
            return upgrade
        }
    }

    /// Failed code of an upgrade whose device came back from its reboot with another version than the target.
    static package let rollbackFailedCode = "rollback"

    /// Ends the device's upgrade as failed (`timeout`) unless it ended or moved on since `lastChange` (the agent time
    /// the watch last saw it move, or its start when the daemon restarted).
    package func failStalledUpgrade(device: String, lastChange: Millis, now: Millis) throws -> OTAUpgrade? {
        try changeUpgrade(device) { current in
            guard var upgrade = current, upgrade.isRunning, upgrade.updatedAt <= lastChange else { return nil }
            upgrade.stage = .failed
            upgrade.failedCode = Self.stallFailedCode
            upgrade.updatedAt = now
            upgrade.endedAt = now
            return upgrade
        }
    }

    /// The device's current upgrade after `body` made its change (nil from `body`: no change).
    func changeUpgrade(_ device: String, _ body: (OTAUpgrade?) throws -> OTAUpgrade?) throws -> OTAUpgrade? {
        let (current, changed) = try upgrades.change(device, persist: { next in
            try store.withLock { store in
                guard let store else { return }
                try store.database.transaction(.immediate) { try OTAUpgrades.write(next, to: store.database) }
            }
        }, body)
        if changed, let current {
            hub.publish([.upgradeChanged(deviceId: device, upgrade: current)])
            watches.upgradeChanged(current)
        }
        return current
    }
}
