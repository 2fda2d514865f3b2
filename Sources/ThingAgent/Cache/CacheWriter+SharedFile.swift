/// The requester's write path: the daemon writes the same file, so every change is one SQLite transaction that
/// reads the devices it changes from the file, writes them, then stores them in memory and tells listeners what
/// changed in this process's view. A requester sees few messages (answers, the reports it follows), so one
/// transaction each costs nothing, and it never writes back an older copy of a device than the file holds.
extension CacheWriter {
    func applyToSharedFile(_ message: InboundMessage, to deviceId: String, now: Millis) throws -> Outcome {
        try commit { batch throws -> Outcome in
            let existing = try batch.device(deviceId)
            var snapshot = existing ?? DeviceSnapshot(id: deviceId, seenAt: now)
            let changes = try snapshot.apply(message, now: now, maxProperties: maxProperties)
            let persist = !changes.isEmpty || existing == nil
            let heard = batch.stage(snapshot, changes, persist: persist)
            guard persist || !heard.isEmpty else { return .unchanged }
            if let transfer = heard.transfer, transfer.status == .finish, let faulty = transfer.targetDeviceId {
                // Only for a transfer started through this agent (or an eligible one, when trusted); the daemon
                // ends the record, this process only reads it.
                let inMemory = acceptedTransfers.withLock { $0[deviceId] == faulty }
                let accepted = try inMemory || (batch.store?.isAcceptedTransfer(gateway: deviceId, target: faulty) ?? false)
                let trusted = accepted || isEligibleForeignTransfer(gateway: deviceId, target: faulty)
                // Not trusted here, memory still catches up with what the daemon re-linked in the file (it may
                // have ended the record already).
                try relinkSubDevices(of: faulty, to: deviceId, reportedAt: transfer.time, now: now, in: &batch,
                                     moving: trusted)
                if !trusted {
                    var refused = heard
                    refused.untrustedFinish = true
                    return .changed(refused)
                }
            }
            return .changed(heard)
        }
    }

    /// Re-links the sub-devices of the faulty gateway to `gateway` (see `DeviceSnapshot.relink` for the rule).
    /// The daemon may have re-linked them in the file already: memory then catches up with the file. Not
    /// `moving`: only that catching up.
    func relinkSubDevices(of faulty: String, to gateway: String, reportedAt time: Millis, now: Millis,
                          in batch: inout Batch, moving: Bool = true) throws {
        var ids = Set(try batch.subDevices(of: faulty).map(\.id))
        ids.formUnion(cache.subDevices(of: faulty).map(\.id))
        for id in ids.sorted() where id != gateway {
            guard var device = try batch.device(id) else { continue }
            if device.info.gatewayId == faulty {
                guard moving else { continue }
                device.relink(to: gateway, at: time, now: now)
                batch.stage(device, AppliedChanges(info: true))
            } else {
                batch.stage(device, AppliedChanges(), persist: false)
            }
        }
    }

    /// The devices changed by one `commit`, read from the file and staged under the store's lock.
    struct Batch {
        fileprivate let store: CacheStore?
        fileprivate let cache: DeviceCache
        fileprivate(set) var staged: [Staged] = []

        struct Staged: Sendable {
            var device: DeviceSnapshot
            /// What to write (nothing when only memory catches up with the file).
            var changes: AppliedChanges
            var persist: Bool
            /// What listeners hear: memory before against the new copy.
            var heard: AppliedChanges
        }

        /// The current snapshot of `id`: staged in this batch, else from the file.
        func device(_ id: String) throws -> DeviceSnapshot? {
            if let staged = staged.last(where: { $0.device.id == id }) { return staged.device }
            return try store?.loadDevice(id) ?? cache.device(id)
        }

        /// Devices whose info names `gateway`, read the way `device(_:)` reads.
        func subDevices(of gateway: String) throws -> [DeviceSnapshot] {
            let found = try store?.loadSubDevices(of: gateway) ?? cache.subDevices(of: gateway)
            return found.map { device in staged.last(where: { $0.device.id == device.id })?.device ?? device }
                .filter { $0.info.gatewayId == gateway }
        }

        /// Queues a snapshot for the commit (a later stage of the same device adds to an earlier one) and returns
        /// what listeners will hear of it.
        @discardableResult
        mutating func stage(_ device: DeviceSnapshot, _ changes: AppliedChanges, persist: Bool = true) -> AppliedChanges {
            let heard = AppliedChanges(from: cache.device(device.id), to: device)
            if let index = staged.firstIndex(where: { $0.device.id == device.id }) {
                staged[index].device = device
                staged[index].changes.merge(changes)
                staged[index].persist = staged[index].persist || persist
                staged[index].heard = heard
            } else {
                staged.append(Staged(device: device, changes: changes, persist: persist, heard: heard))
            }
            return heard
        }
    }

    /// Runs `body` under the store's lock; what it staged is written in one SQLite transaction, then stored in
    /// memory, then (outside the lock) published to listeners. A throw from `body` or SQLite changes nothing.
    func commit<Result: Sendable>(_ body: @Sendable (inout Batch) throws -> Result) throws -> Result {
        let (result, staged) = try store.withLock { store throws -> (Result, [Batch.Staged]) in
            var batch = Batch(store: store, cache: cache)
            let result: Result
            if let store {
                result = try store.database.transaction(.immediate) {
                    let result = try body(&batch)
                    for entry in batch.staged where entry.persist {
                        // The whole row: it was read from the file in this transaction, so it is the file's plus
                        // this change.
                        try store.write(entry.device, row: true, properties: entry.changes.properties.map(\.code),
                                        transfer: entry.changes.transfer != nil)
                    }
                    return result
                }
            } else {
                result = try body(&batch)
            }
            for entry in batch.staged { cache.store(entry.device) }
            return (result, batch.staged)
        }
        for entry in staged {
            hub.publish(entry.heard.events(for: entry.device))
            if !entry.heard.isEmpty { watches.applied(entry.heard, to: entry.device.id, now: entry.device.updatedAt) }
        }
        return result
    }
}
