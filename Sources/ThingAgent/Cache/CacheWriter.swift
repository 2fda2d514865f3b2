import Synchronization

/// The one way the cache changes: apply to copies, commit them to SQLite in one transaction, then publish them in
/// memory and to listeners. Memory never runs ahead of the disk, so a failed write leaves both as they were.
final class CacheWriter: Sendable {
    let cache: DeviceCache
    let hub: EventHub
    /// Another process (the daemon) writes the same file, so each device is read from the file, inside the write
    /// transaction, before it is changed: this process never writes back an older copy it holds in memory. The
    /// other process may have applied a message already; listeners then hear what changed in this process's view
    /// (memory before, file after), so they miss nothing.
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

    /// Applies `message` to `deviceId`'s snapshot (creating the device on its first valid message). Returns the
    /// changes as listeners hear them. A transfer that reaches `finish` re-links the faulty gateway's sub-devices
    /// in the same transaction.
    func apply(_ message: InboundMessage, to deviceId: String, now: Millis) throws -> Outcome {
        try commit { batch throws -> Outcome in
            let existing = try batch.device(deviceId)
            var snapshot = existing ?? DeviceSnapshot(id: deviceId, seenAt: now)
            let changes = try snapshot.apply(message, now: now)
            let persist = !changes.isEmpty || existing == nil
            let heard = batch.stage(snapshot, changes, persist: persist)
            guard persist || !heard.isEmpty else { return .unchanged }
            if let transfer = heard.transfer, transfer.status == .finish, let faulty = transfer.targetDeviceId {
                try relinkSubDevices(of: faulty, to: deviceId, reportedAt: transfer.time, now: now, in: &batch)
            }
            return .changed(heard)
        }
    }

    /// The devices changed by one `commit`, read and staged under the store's lock.
    struct Batch {
        fileprivate let store: CacheStore?
        fileprivate let cache: DeviceCache
        fileprivate let sharesFile: Bool
        fileprivate(set) var staged: [Staged] = []

        struct Staged: Sendable {
            var device: DeviceSnapshot
            /// What to write (nothing when only memory catches up with the file).
            var changes: AppliedChanges
            var persist: Bool
            /// What listeners hear.
            var heard: AppliedChanges
        }

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

        /// Queues a snapshot for the commit (a later stage of the same device adds to an earlier one) and returns
        /// what listeners will hear of it: `changes`, or with a shared file, memory before against the new copy.
        @discardableResult
        mutating func stage(_ device: DeviceSnapshot, _ changes: AppliedChanges, persist: Bool = true) -> AppliedChanges {
            let index = staged.firstIndex { $0.device.id == device.id }
            let heard = sharesFile ? AppliedChanges(from: cache.device(device.id), to: device)
                : (index.map { staged[$0].heard } ?? AppliedChanges()).merging(changes)
            if let index {
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

    /// Runs `body` under the lock; what it staged is written in one SQLite transaction, then stored in memory, then
    /// (outside the lock) published to listeners. A throw from `body` or from SQLite changes nothing anywhere.
    func commit<Result: Sendable>(_ body: @Sendable (inout Batch) throws -> Result) throws -> Result {
        let (result, staged) = try store.withLock { store throws -> (Result, [Batch.Staged]) in
            var batch = Batch(store: store, cache: cache, sharesFile: sharesFile)
            let result: Result
            if let store {
                result = try store.database.transaction(.immediate) {
                    let result = try body(&batch)
                    for entry in batch.staged where entry.persist { try store.write(entry.device, entry.changes) }
                    return result
                }
            } else {
                result = try body(&batch)
            }
            for entry in batch.staged { cache.store(entry.device) }
            return (result, batch.staged)
        }
        for entry in staged { hub.publish(entry.heard.events(for: entry.device)) }
        return result
    }
}
