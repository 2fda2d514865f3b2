import JSON

/// Where a firmware upgrade stands. `accepted` is the agent's own: the device took `ota/start` and has not
/// reported progress yet. The device's stages follow (docs/protocol.md); `succeeded` and `failed` end it.
public enum OTAStage: String, Sendable, CaseIterable {
    case accepted, downloading, verifying, flashing, rebooting, succeeded, failed

    public var isRunning: Bool { self != .succeeded && self != .failed }
}

/// One device's latest firmware upgrade, as the cache keeps it (table `ota_upgrades`, one row per device).
public struct OTAUpgrade: Sendable, Equatable {
    public var deviceId: String
    /// The version the device reported when the upgrade started.
    public var fromVersion: String?
    public var image: FirmwareCatalog.Image
    public var stage: OTAStage
    /// 0 to 100, the device's own figure for its current stage.
    public var progress: Int
    /// Why it failed: the device's `failedCode`, `rollback` (the old version after a reboot) or `timeout`.
    public var failedCode: String
    /// Agent time `ota/start` was accepted.
    public var startedAt: Millis
    /// Agent time of the latest change (the stall clock).
    public var updatedAt: Millis
    /// Device time of the latest progress report; older reports lose.
    public var reportTime: Millis
    /// Agent time the upgrade ended.
    public var endedAt: Millis?

    package init(deviceId: String, fromVersion: String?, image: FirmwareCatalog.Image, stage: OTAStage, progress: Int,
                 failedCode: String, startedAt: Millis, updatedAt: Millis, reportTime: Millis, endedAt: Millis?) {
        self.deviceId = deviceId
        self.fromVersion = fromVersion
        self.image = image
        self.stage = stage
        self.progress = progress
        self.failedCode = failedCode
        self.startedAt = startedAt
        self.updatedAt = updatedAt
        self.reportTime = reportTime
        self.endedAt = endedAt
    }

    public var isRunning: Bool { stage.isRunning }

    public var json: JSONObject {
        var object = JSONObject([
            ("devId", .string(deviceId)), ("fromVersion", fromVersion.map(JSONValue.string) ?? .null),
            ("version", .string(image.version)), ("stage", .string(stage.rawValue)),
            ("progress", .integer(Int64(progress))), ("failedCode", .string(failedCode)),
            ("startedAt", .integer(startedAt)), ("updatedAt", .integer(updatedAt)),
            ("endedAt", endedAt.map(JSONValue.integer) ?? .null),
        ])
        object["url"] = .string(image.url)
        return object
    }
}

/// A device's `ota/progress` report.
package struct OTAProgressReport: Sendable, Equatable {
    package var version: String
    package var stage: OTAStage
    package var progress: Int
    package var failedCode: String
    package var time: Millis

    /// The stages a device may report (not the agent's own `accepted` and `succeeded`).
    static package let reportable: [OTAStage] = [.downloading, .verifying, .flashing, .rebooting, .failed]

    package init(version: String, stage: OTAStage, progress: Int, failedCode: String, time: Millis) {
        self.version = version
        self.stage = stage
        self.progress = progress
        self.failedCode = failedCode
        self.time = time
    }

    static package func decode(_ object: JSONObject, time: Millis) throws(PayloadError) -> OTAProgressReport {
        guard let data = object["data"]?.objectValue else { throw PayloadError("ota progress has no 'data' object") }
        guard let version = data["version"]?.stringValue, !version.isEmpty, version.utf8.count <= 64 else {
            throw PayloadError("ota progress needs 'data.version', a string of 1 to 64 bytes")
        }
        guard let state = data["state"]?.stringValue, let stage = OTAStage(rawValue: state),
              reportable.contains(stage) else {
            throw PayloadError("ota progress 'data.state' must be one of downloading, verifying, flashing, rebooting, failed")
        }
        var progress = 0
        if let given = data["progress"], !given.isNull {
            guard let n = given.int64Value, (0...100).contains(n) else {
                throw PayloadError("ota progress 'data.progress' must be an integer from 0 to 100")
            }
            progress = Int(n)
        }
        var failedCode = ""
        if stage == .failed {
            let code = data["failedCode"]?.stringValue ?? ""
            failedCode = code.isEmpty ? "device" : String(code.prefix(64))
        }
        return OTAProgressReport(version: version, stage: stage, progress: progress, failedCode: failedCode, time: time)
    }
}
