/// What a standby instance of an agent group takes from the active one's records (docs/architecture.md, "Standby
/// instances"): the upgrades and gateway transfers the active started or judged. A standby hears the devices' own
/// reports itself; these bring what only the active writes, by the same paths and rules as a report.
extension CacheWriter {
    /// Takes the active instance's record of `device`'s upgrade (nil: it has none). The same upgrade (same start,
    /// same version) is followed here by the device's own reports, so the record changes it only when it ended
    /// there and still runs here (a stall verdict); another upgrade replaces it (a new start, or a start undone).
    @discardableResult
    package func adoptUpgrade(device: String, _ record: OTAUpgrade?) throws -> OTAUpgrade? {
        guard let record else {
            guard upgrades.upgrade(device) != nil else { return nil }
            try restoreUpgrade(device: device, nil)
            return nil
        }
        return try changeUpgrade(device) { current in
            if let current, current.startedAt == record.startedAt, current.image.version == record.image.version {
                return current.isRunning && !record.isRunning ? record : nil
            }
            return record
        }
    }

    /// The target of the transfer `gateway` was asked to start here (recorded before the start was sent), if any.
    package func acceptedTarget(gateway: String) -> String? {
        acceptedTransfers.withLock { $0[gateway] }
    }

    /// Takes the active instance's view of `gateway`'s transfer: its accepted start (nil: none), and the transfer as
    /// it cached it, applied as the report it amounts to (journaled, and a report older than the cached one loses).
    package func adoptTransfer(gateway: String, accepted: (target: String, at: Millis)?, info: TransferInfo?,
                               topic: String, now: Millis) throws {
        let current = acceptedTarget(gateway: gateway)
        if let accepted, current != accepted.target {
            try recordAcceptedTransfer(gateway: gateway, target: accepted.target, at: accepted.at)
        } else if accepted == nil, let current {
            forgetAcceptedTransfer(gateway: gateway, target: current)
        }
        guard let info, let target = info.targetDeviceId else { return }
        let report = TransferStatusReport(targetDeviceId: target, targetDeviceName: info.targetDeviceName,
                                          sourceDeviceId: gateway, status: info.status, failedCode: info.failedCode,
                                          time: info.time)
        _ = try applyInPlace(to: gateway, now: now) { device in
            guard let device else { return nil }
            if let cached = device.transfer, cached.time > report.time { return nil }
            return (.transferStatus(report), (topic, report.payload))
        }
    }
}
