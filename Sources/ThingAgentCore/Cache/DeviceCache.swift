import Synchronization

/// The in-memory side of the cache: every device's snapshot, answered without I/O.
/// Loaded from SQLite before the broker connects; changed only by `CacheWriter`, after the change is on disk.
public final class DeviceCache: Sendable {
    private let devices: Mutex<[String: DeviceSnapshot]>
    /// Devices by status, kept as they change so that the metrics never take the lock above.
    package let statusTally = StatusTally()

    package init(_ devices: [String: DeviceSnapshot] = [:]) {
        self.devices = Mutex(devices)
        for device in devices.values { statusTally.moved(from: .none, to: device.online) }
    }

    public func device(_ id: String) -> DeviceSnapshot? {
        devices.withLock { $0[id] }
    }

    public var count: Int { devices.withLock { $0.count } }

    /// Whether `id` is cached, and its online status (nil while unknown).
    package func status(of id: String) -> (known: Bool, online: Bool?) {
        devices.withLock { devices in
            guard let index = devices.index(forKey: id) else { return (false, nil) }
            return (true, devices.values[index].online)
        }
    }

    public func contains(_ id: String) -> Bool {
        devices.withLock { $0.index(forKey: id) != nil }
    }

    /// All devices, sorted by id.
    public func all() -> [DeviceSnapshot] {
        devices.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }

    /// The devices `isIncluded` picks, sorted by id (only those are copied and sorted).
    public func filter(_ isIncluded: (DeviceSnapshot) -> Bool) -> [DeviceSnapshot] {
        devices.withLock { $0.values.filter(isIncluded) }.sorted { $0.id < $1.id }
    }

    /// The first `count` devices in id order after `after` among those `isIncluded` picks: one pass that keeps
    /// only the page (an API page must not copy and sort a million devices).
    package func page(after: String?, count: Int, where isIncluded: (DeviceSnapshot) -> Bool) -> [DeviceSnapshot] {
        devices.withLock { devices in
            var ids: [String] = []  // sorted, at most `count`
            for (id, device) in devices {
                if let after, id <= after { continue }
                if ids.count == count, let last = ids.last, id >= last { continue }
                guard isIncluded(device) else { continue }
                var low = 0, high = ids.count
                while low < high {
                    let middle = (low + high) / 2
                    if ids[middle] < id { low = middle + 1 } else { high = middle }
                }
                ids.insert(id, at: low)
                if ids.count > count { ids.removeLast() }
            }
            return ids.compactMap { devices[$0] }
        }
    }

    /// Devices whose info names `gateway` as their gateway.
    public func subDevices(of gateway: String) -> [DeviceSnapshot] {
        devices.withLock { $0.values.filter { $0.info.gatewayId == gateway } }.sorted { $0.id < $1.id }
    }

    /// Changes one device in place (no copy of its snapshot), creating it when `create` gives one.
    /// A body that throws leaves the device as it was (and does not create it).
    package func mutate<R>(_ id: String, create: () -> DeviceSnapshot?,
                   _ body: (inout DeviceSnapshot, _ isNew: Bool) throws -> R) throws -> R? {
        try devices.withLock { devices -> R? in
            if let index = devices.index(forKey: id) {
                let before = devices.values[index].online
                let result = try body(&devices.values[index], false)
                let after = devices.values[index].online
                if after != before { statusTally.moved(from: .some(before), to: after) }
                return result
            }
            guard var created = create() else { return nil }
            let result = try body(&created, true)
            devices[id] = created
            statusTally.moved(from: .none, to: created.online)
            return result
        }
    }

    /// Copies of the named devices, for the flusher.
    package func devices(_ ids: some Sequence<String>) -> [DeviceSnapshot] {
        devices.withLock { devices in ids.compactMap { devices[$0] } }
    }

    /// Forgets a device; false when it was not known.
    package func remove(_ id: String) -> Bool {
        devices.withLock { devices in
            guard let removed = devices.removeValue(forKey: id) else { return false }
            statusTally.moved(from: .some(removed.online), to: .none)
            return true
        }
    }

    package func store(_ snapshot: DeviceSnapshot) {
        devices.withLock { devices in
            let before = devices.updateValue(snapshot, forKey: snapshot.id)
            statusTally.moved(from: before.map(\.online), to: .some(snapshot.online))
        }
    }

}
