import Synchronization

/// The one way the cache changes: apply to copies, commit them to SQLite in one transaction, then publish them in
/// memory and to listeners. Memory never runs ahead of the disk, so a failed write leaves both as they were.
final class CacheWriter: Sendable {
    let cache: DeviceCache
    let hub: EventHub
    /// Another process (the daemon) writes the same file, so each device is read from the file, inside the write
    /// transaction, before it is changed: this process never writes back an older copy it holds in memory.
    let sharesFile: Bool
    /// The store, and the lock that makes read-modify-write of a snapshot atomic across writers
    /// (the receive thread, timers, edits from the library).
    /// nil for a memory-only cache (`thing-agent watch`, which must not write the daemon's file).
    private let store: Mutex<CacheStore?>

    init(store: sending CacheStore?, cache: DeviceCache, hub: EventHub, sharesFile: Bool = false) {
        self.store = Mutex(store)
        self.cache = cache
        self.hub = hub
        self.sharesFile = sharesFile
    }

    enum Outcome: Equatable {
        case changed(AppliedChanges)
        case unchanged
    }

    /// Applies `message` to `deviceId`'s snapshot (creating the device on its first valid message).
    /// A transfer report that reaches `finish` re-links the faulty gateway's sub-devices in the same transaction.
    func apply(_ message: InboundMessage, to deviceId: String, now: Millis) throws -> Outcome {
        try commit { batch throws -> Outcome in
            let existing = try batch.device(deviceId)
            var snapshot = existing ?? DeviceSnapshot(id: deviceId, seenAt: now)
            let changes = try snapshot.apply(message, now: now)
            guard !changes.isEmpty || existing == nil else { return .unchanged }
            batch.stage(snapshot, changes)
            if let transfer = changes.transfer, transfer.status == .finish, let faulty = transfer.targetDeviceId {
                try relinkSubDevices(of: faulty, to: deviceId, reportedAt: transfer.time, now: now, in: &batch)
            }
            return .changed(changes)
        }
    }

    /// The devices changed by one `commit`, read and staged under the store's lock.
    struct Batch {
        fileprivate let store: CacheStore?
        fileprivate let cache: DeviceCache
        fileprivate let sharesFile: Bool
        fileprivate(set) var staged: [(device: DeviceSnapshot, changes: AppliedChanges)] = []

        /// The current snapshot of `id`: staged in this batch, else from the file when it is shared, else memory.
        func device(_ id: String) throws -> DeviceSnapshot? {
            if let staged = staged.last(where: { $0.device.id == id }) { return staged.device }
            if sharesFile, let store { return try store.loadDevice(id) }
            return cache.device(id)
        }

        /// Devices whose info names `gateway`, read the way `device(_:)` reads.
        func subDevices(of gateway: String) throws -> [DeviceSnapshot] {
            let found = if sharesFile, let store { try store.loadSubDevices(of: gateway) } else { cache.subDevices(of: gateway) }
            return found.map { device in staged.last(where: { $0.device.id == device.id })?.device ?? device }
                .filter { $0.info.gatewayId == gateway }
        }

        /// Queues a changed snapshot for the commit (a later stage of the same device replaces an earlier one).
        mutating func stage(_ device: DeviceSnapshot, _ changes: AppliedChanges) {
            if let index = staged.firstIndex(where: { $0.device.id == device.id }) {
                staged[index].device = device
                staged[index].changes.merge(changes)
            } else {
                staged.append((device, changes))
            }
        }
    }

    /// Runs `body` under the lock; what it staged is written in one SQLite transaction, then stored in memory, then
    /// (outside the lock) published to listeners. A throw from `body` or from SQLite changes nothing anywhere.
    func commit<Result: Sendable>(_ body: @Sendable (inout Batch) throws -> Result) throws -> Result {
        let (result, staged) = try store.withLock { store throws -> (Result, [(DeviceSnapshot, AppliedChanges)]) in
            var batch = Batch(store: store, cache: cache, sharesFile: sharesFile)
            let result: Result
            if let store {
                result = try store.database.transaction(.immediate) {
                    let result = try body(&batch)
                    for (device, changes) in batch.staged { try store.write(device, changes) }
                    return result
                }
            } else {
                result = try body(&batch)
            }
            for (device, _) in batch.staged { cache.store(device) }
            return (result, batch.staged)
        }
        for (device, changes) in staged { hub.publish(changes.events(for: device)) }
        return result
    }
}
