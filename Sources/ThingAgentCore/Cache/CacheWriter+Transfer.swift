import JSON

/// Gateway-replacement changes that do not come from a device: the start a gateway accepted and the end of a
/// transfer that stalled. Each is written as the transfer-status report it amounts to and goes the way reports go
/// (journaled before it is applied, so a restart replays it).
extension CacheWriter {
    /// Failed code given to a transfer ended by the agent because it made no progress.
    static package let stallFailedCode = "timeout"

    /// Records that `gateway` accepted to replace `target`: status `unknown` until its first report.
    /// Nothing changes when a report of this transfer got here first (a running status, or any status recorded
    /// after `sentAt`, the agent time the start was sent; the same millisecond counts as before, since a gateway
    /// answers before it reports); the cached transfer is returned either way.
    package func recordTransferStart(gateway: String, target: String, targetName: String?, sentAt: Millis, now: Millis,
                             topic: String) throws -> TransferInfo? {
        try applyVerdict(to: gateway, topic: topic, now: now) { current in
            if let current, !current.status.isIdle || current.updatedAt > sentAt { return nil }
            // Keeps the time of the latest report: the stale rule then lets the gateway's next report win.
            return TransferStatusReport(targetDeviceId: target, targetDeviceName: targetName, sourceDeviceId: gateway,
                                        status: .unknown, failedCode: "", time: current?.time ?? 0)
        }
    }

    /// Ends `gateway`'s transfer as failed with failedCode `timeout`, unless it ended or moved on since
    /// `lastChange` (the agent time of the change the caller saw). Returns the cached transfer afterwards.
    package func failStalledTransfer(gateway: String, lastChange: Millis, now: Millis, topic: String) throws -> TransferInfo? {
        try applyVerdict(to: gateway, topic: topic, now: now) { current in
            guard let current, !current.status.isIdle, current.updatedAt == lastChange,
                  let target = current.targetDeviceId else { return nil }
            // Device time of the verdict: a report made before it is stale; one made later (a late finish) wins.
            return TransferStatusReport(targetDeviceId: target, targetDeviceName: current.targetDeviceName,
                                        sourceDeviceId: gateway, status: .failed, failedCode: Self.stallFailedCode,
                                        time: max(current.time, now))
        }
    }

    /// Applies the report `verdict` makes of the gateway's current transfer (nil: nothing to do), checked and
    /// applied under the same lock, so no report can slip in between.
    private func applyVerdict(to gateway: String, topic: String, now: Millis,
                              _ verdict: @escaping @Sendable (TransferInfo?) -> TransferStatusReport?) throws -> TransferInfo? {
        _ = try applyInPlace(to: gateway, now: now) { device in
            guard let device, let report = verdict(device.transfer) else { return nil }
            return (.transferStatus(report), (topic, report.payload))
        }
        return cache.device(gateway)?.transfer
    }
}

extension TransferStatusReport {
    /// docs/protocol.md's payload for this report, as a gateway would publish it.
    package var payload: [UInt8] {
        var data = JSONObject([("targetDeviceId", .string(targetDeviceId))])
        if let targetDeviceName { data["targetDeviceName"] = .string(targetDeviceName) }
        data["sourceDeviceId"] = .string(sourceDeviceId)
        data["status"] = .integer(Int64(status.rawValue))
        data["failedCode"] = .string(failedCode)
        return JSONValue.object(JSONObject([("time", .integer(time)), ("data", .object(data))])).serializedBytes()
    }
}

/// Whom a transfer `finish` may move sub-devices for (docs/protocol.md, "Rules the agent keeps"): a transfer this agent
/// started, recorded before its start was sent; or, with `trustForeignTransfers`, an eligible gateway.
extension CacheWriter {
    /// Records, before the start is sent, that `gateway` is asked to take over `target` (the gateway may report
    /// progress the moment it accepts).
    package func recordAcceptedTransfer(gateway: String, target: String, at time: Millis) throws {
        acceptedTransfers.withLock { $0[gateway] = target }
        try store.withLock { store in
            try store?.database.transaction(.immediate) {
                try store?.recordAcceptedTransfer(gateway: gateway, target: target, at: time)
            }
        }
    }

    /// Forgets a start the gateway refused (or that was never sent).
    package func forgetAcceptedTransfer(gateway: String, target: String) {
        acceptedTransfers.withLock { if $0[gateway] == target { $0[gateway] = nil } }
        try? store.withLock { store in try store?.forgetAcceptedTransfer(gateway: gateway, target: target) }
    }

    /// Whether this process or another on the same file started `gateway`'s transfer from `target`.
    /// Called under the ingest lock (which comes before the store's lock), never under the store's.
    package func isAccepted(gateway: String, target: String) -> Bool {
        if acceptedTransfers.withLock({ $0[gateway] == target }) { return true }
        return (try? store.withLock { try $0?.isAcceptedTransfer(gateway: gateway, target: target) }) == true
    }

    /// With `trustForeignTransfers`: a known gateway with the gatewayTransfer ability that could replace `target`
    /// (another gateway of its product in its space).
    package func isEligibleForeignTransfer(gateway: String, target: String) -> Bool {
        guard trustsForeignTransfers, let me = cache.device(gateway), me.info.supports(.gatewayTransfer),
              let faulty = cache.device(target) else { return false }
        return faulty.isReplaceable(by: me)
    }
}
