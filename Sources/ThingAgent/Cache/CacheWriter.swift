import Synchronization

/// The one way the cache changes: apply to a copy, commit to SQLite, then publish in memory and to listeners.
/// Memory never runs ahead of the disk, so a failed write leaves both as they were.
final class CacheWriter: Sendable {
    let cache: DeviceCache
    let hub: EventHub
    /// The store, and the lock that makes read-modify-write of a snapshot atomic across writers
    /// (the receive thread, timers, edits from the library).
    /// nil for a memory-only cache (`thing-agent watch`, which must not write the daemon's file).
    private let store: Mutex<CacheStore?>

    init(store: sending CacheStore?, cache: DeviceCache, hub: EventHub) {
        self.store = Mutex(store)
        self.cache = cache
        self.hub = hub
    }

    enum Outcome: Equatable {
        case changed(AppliedChanges)
        case unchanged
    }

    /// Applies `message` to `deviceId`'s snapshot (creating the device on its first valid message).
    func apply(_ message: InboundMessage, to deviceId: String, now: Millis) throws -> Outcome {
        let (snapshot, changes, isNew) = try store.withLock { store throws -> (DeviceSnapshot, AppliedChanges, Bool) in
            let existing = cache.device(deviceId)
            var snapshot = existing ?? DeviceSnapshot(id: deviceId, seenAt: now)
            let changes = try snapshot.apply(message, now: now)
            guard !changes.isEmpty || existing == nil else { return (snapshot, changes, false) }
            try store?.database.transaction(.immediate) {
                try store?.write(snapshot, changes)
            }
            cache.store(snapshot)
            return (snapshot, changes, existing == nil)
        }
        guard !changes.isEmpty || isNew else { return .unchanged }
        hub.publish(changes.events(for: snapshot))
        return .changed(changes)
    }
}
