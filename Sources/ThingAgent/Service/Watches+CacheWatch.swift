import ThingAgentCore
// The watches hear the cache writer (Cache/CacheWatch.swift): Service uses Cache, never the reverse.

extension OfflineWatch: CacheWatch {
    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        if let online = changes.status { statusChanged(device, online: online, now: now) }
        // The replacement deleted the faulty gateway's alert from the file; memory must not warn or write it back.
        if let faulty = changes.replacedGateway { forget(faulty) }
    }

    func removed(_ device: String) {
        forget(device)
    }
}

extension TransferWatch: CacheWatch {
    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        if let transfer = changes.transfer { transferChanged(transfer) }
    }

    func removed(_ device: String) {
        forgetGateway(device)
    }
}

extension LinkEngine: CacheWatch {
    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        changed(changes, on: device)
    }

}
