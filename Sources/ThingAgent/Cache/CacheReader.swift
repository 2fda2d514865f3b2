/// Reads the cache file directly, without loading the fleet or reaching the broker: what the CLI's `info` and
/// `devices` use, also while the daemon writes (WAL lets readers and the writer work side by side).
public final class CacheReader {
    private let store: CacheStore

    /// Opens the cache read-only. A missing file is an error that names the path.
    public init(path: String) throws {
        store = try CacheStore(path: path, readOnly: true)
    }

    public func device(_ id: String) throws -> DeviceSnapshot? {
        try store.loadDevice(id)
    }

    /// The devices whose info names `gateway` as their gateway.
    public func subDevices(of gateway: String) throws -> [DeviceSnapshot] {
        try store.loadSubDevices(of: gateway)
    }

    /// The receive-path counters the daemon last wrote into the file; nil when no daemon ran on it yet.
    public func statistics() throws -> StoredStatistics? {
        StoredStatistics(metaRows: try store.meta(prefix: "ingest."))
    }

    /// The device's running or latest firmware upgrade.
    public func upgrade(_ id: String) throws -> OTAUpgrade? {
        try OTAUpgrades.read(store.database, device: id).first
    }

    /// Every device's latest firmware upgrade, sorted by device id.
    public func upgrades() throws -> [OTAUpgrade] {
        try OTAUpgrades.read(store.database)
    }

    /// Every cached device, sorted by id.
    public func devices() throws -> [DeviceSnapshot] {
        // The ids are sorted and each snapshot moved out once: sorting the snapshots themselves copied them (and
        // retained and released every buffer they hold) at each step of the merge, a quarter of `devices`' time.
        var all = try store.loadAll()
        return all.keys.sorted().compactMap { all.removeValue(forKey: $0) }
    }
}
