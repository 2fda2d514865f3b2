import Synchronization

/// The in-memory side of the cache: every device's snapshot, answered without I/O.
/// Loaded from SQLite before the broker connects; changed only by `CacheWriter`, after the change is on disk.
public final class DeviceCache: Sendable {
    private let devices: Mutex<[String: DeviceSnapshot]>

    init(_ devices: [String: DeviceSnapshot] = [:]) {
        self.devices = Mutex(devices)
    }

    public func device(_ id: String) -> DeviceSnapshot? {
        devices.withLock { $0[id] }
    }

    public var count: Int { devices.withLock { $0.count } }

    /// All devices, sorted by id.
    public func all() -> [DeviceSnapshot] {
        devices.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }

    /// Devices whose info names `gateway` as their gateway.
    public func subDevices(of gateway: String) -> [DeviceSnapshot] {
        devices.withLock { $0.values.filter { $0.info.gatewayId == gateway } }.sorted { $0.id < $1.id }
    }

    func store(_ snapshot: DeviceSnapshot) {
        devices.withLock { $0[snapshot.id] = snapshot }
    }

    func replaceAll(_ snapshots: [String: DeviceSnapshot]) {
        devices.withLock { $0 = snapshots }
    }
}
