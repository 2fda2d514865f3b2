/// Gateway-replacement changes that do not come from a report: the start a gateway accepted, a transfer that
/// stalled, and the re-link of sub-devices on finish. All go through `commit`, like reports.
extension CacheWriter {
    /// Failed code given to a transfer ended by the agent because it made no progress.
    static let stallFailedCode = "timeout"

    /// Records that `gateway` accepted to replace `target`: status `unknown` until its first report.
    /// Nothing changes when a report of this transfer got here first (a running status, or any status recorded
    /// after `sentAt`, the agent time the start was sent); the cached transfer is returned either way.
    func recordTransferStart(gateway: String, target: String, targetName: String?, sentAt: Millis,
                             now: Millis) throws -> TransferInfo {
        try commit { batch throws -> TransferInfo in
            guard var device = try batch.device(gateway) else { return .none(gateway) }
            if let current = device.transfer, !current.status.isIdle || current.updatedAt >= sentAt {
                return current
            }
            // Keeps the time of the latest report: the stale rule then lets the gateway's next report win.
            let started = TransferInfo(sourceDeviceId: gateway, targetDeviceId: target, targetDeviceName: targetName,
                                       status: .unknown, time: device.transfer?.time ?? 0, updatedAt: now)
            device.transfer = started
            device.updatedAt = now
            batch.stage(device, AppliedChanges(transfer: started))
            return started
        }
    }

    /// Ends `gateway`'s transfer as failed with failedCode `timeout`, unless it ended or moved on since
    /// `lastChange` (the agent time of the change the caller saw). Returns the cached transfer afterwards.
    func failStalledTransfer(gateway: String, lastChange: Millis, now: Millis) throws -> TransferInfo? {
        try commit { batch throws -> TransferInfo? in
            guard var device = try batch.device(gateway), var transfer = device.transfer else { return nil }
            guard !transfer.status.isIdle, transfer.updatedAt == lastChange else { return transfer }
            transfer.status = .failed
            transfer.failedCode = Self.stallFailedCode
            // Device time of the verdict: a report made before it is stale; one made later (a late finish) wins.
            transfer.time = max(transfer.time, now)
            transfer.updatedAt = now
            device.transfer = transfer
            device.updatedAt = now
            batch.stage(device, AppliedChanges(transfer: transfer))
            return transfer
        }
    }

    /// Re-links the sub-devices of the faulty gateway to `gateway` (see `DeviceSnapshot.relink` for the rule).
    /// With a shared file another process may have re-linked them already: memory then catches up with the file.
    func relinkSubDevices(of faulty: String, to gateway: String, reportedAt time: Millis, now: Millis,
                          in batch: inout Batch) throws {
        var ids = Set(try batch.subDevices(of: faulty).map(\.id))
        if sharesFile { ids.formUnion(cache.subDevices(of: faulty).map(\.id)) }
        for id in ids.sorted() where id != gateway {
            guard var device = try batch.device(id) else { continue }
            if device.info.gatewayId == faulty {
                device.relink(to: gateway, at: time, now: now)
                batch.stage(device, AppliedChanges(info: true))
            } else {
                batch.stage(device, AppliedChanges(), persist: false)
            }
        }
    }
}
