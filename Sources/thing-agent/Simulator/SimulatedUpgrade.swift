import JSON
import ThingAgent

/// How simulated devices fail their firmware upgrades (`simulate --ota-failure-rate F --ota-fail-at STAGE`).
enum UpgradeFailure: String, Sendable, CaseIterable {
    /// `failed` with failedCode `download`, `verify` or `flash` after that stage.
    case download, verify, flash
    /// Reboots and comes back with the old version.
    case rollback
    /// Stops reporting after the first progress report (the agent's stall timeout ends it).
    case stall

    /// The stage whose report comes last before the failure.
    var lastStage: OTAStage {
        switch self {
        case .download, .stall: .downloading
        case .verify: .verifying
        case .flash: .flashing
        case .rollback: .rebooting
        }
    }
}

extension VirtualDevice {
    /// The answer to `ota/start`: 1003 for data of the wrong shape, 1006 while an upgrade runs, 1007 when the
    /// version is not newer than the one installed; else accepted, and the version to install.
    func answerUpgrade(_ data: JSONObject?) -> (code: Int, message: String?, version: String?) {
        guard let data, let version = data["version"]?.stringValue, FirmwareVersion(version) != nil,
              let url = data["url"]?.stringValue, !url.isEmpty,
              let sha256 = data["sha256"]?.stringValue, FirmwareCatalog.isSHA256(sha256) else {
            return (1003, "'data' needs version (dotted numbers), url and sha256 (64 hex digits)", nil)
        }
        if let size = data["size"], !size.isNull, (size.int64Value ?? 0) <= 0 {
            return (1003, "'data.size' must be a positive integer", nil)
        }
        guard FirmwareVersion.isNewer(version, than: firmwareVersion) else {
            return (1007, "\(version) is not newer than the installed \(firmwareVersion)", nil)
        }
        guard beginUpgrade() else { return (1006, "an upgrade is already running", nil) }
        return (0, nil, version)
    }

    /// An `ota/progress` report.
    func upgradeProgress(version: String, _ stage: OTAStage, progress: Int, failedCode: String? = nil,
                         now: Millis) -> Publication {
        var data = JSONObject([("version", .string(version)), ("state", .string(stage.rawValue)),
                               ("progress", .integer(Int64(progress)))])
        if let failedCode { data["failedCode"] = .string(failedCode) }
        return Publication(topic: topics.otaProgress(id), payload: Self.json([("time", .integer(now)),
                                                                                ("data", .object(data))]))
    }
}

extension Simulator {
    /// A device installs `version`: downloading (0, 50, 100 %), verifying, flashing, rebooting a step apart; then
    /// it goes offline and comes back online with the new version in its info report. At the failure rate it
    /// fails at the chosen stage instead.
    func upgrade(_ device: VirtualDevice, to version: String) async {
        defer { device.endUpgrade() }
        guard let connection = connection(of: device) else { return }
        let failure = device.drawUpgradeFailure(rate: options.otaFailureRate) ? options.otaFailAt : nil
        let steps: [(OTAStage, Int)] = [(.downloading, 0), (.downloading, 50), (.downloading, 100), (.verifying, 100),
                                         (.flashing, 100), (.rebooting, 100)]
        func step() async -> Bool {
            do { try await Task.sleep(for: .seconds(options.otaStep)) } catch { return false }
            return true
        }
        var lastReport: Millis = 0
        for (stage, progress) in steps {
            guard await step() else { return }
            lastReport = Timestamp.current
            await connection.publish(device.upgradeProgress(version: version, stage, progress: progress,
                                                            now: lastReport))
            if failure == .stall { return }
            if let failure, failure != .rollback, stage == failure.lastStage, progress == 100 {
                guard await step() else { return }
                await connection.publish(device.upgradeProgress(version: version, .failed, progress: progress,
                                                                failedCode: failure.rawValue, now: Timestamp.current))
                return
            }
        }
        // The reboot: offline (the will's form), then back with the version it now runs.
        await connection.publish(device.status(online: false, now: Timestamp.current))
        guard await step() else { return }
        if failure != .rollback { device.installed(version) }
        await connection.publish(device.status(online: true, now: Timestamp.current))
        // The agent takes only an info newer than the reboot report as the device's word after the reboot.
        await connection.publish(device.info(now: max(Timestamp.current, lastReport + 1)))
        stats.upgrades.add(1, ordering: .relaxed)
    }
}
