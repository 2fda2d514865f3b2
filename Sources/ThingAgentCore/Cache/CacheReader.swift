import SQLite

/// Reads the cache file directly, without loading the fleet or reaching the broker: what the CLI's `info` and
/// `devices` use, also while the daemon writes (WAL lets readers and the writer work side by side).
///
/// One read-only connection serves everything a command reads (the device, its local metadata, its upgrade):
/// each connection to the file parses the whole schema again, which was a good part of `info`'s own time. It
/// never migrates; a file from before the latest schema is refused with an error that says what to do.
public final class CacheReader {
    private let database: Database

    /// Opens the cache read-only. A missing file is an error that names the path.
    public init(path: String) throws {
        database = try Database(path: path, options: .init(readOnly: true))
        try CacheSchema.requireCurrent(database)
    }

    public func device(_ id: String) throws -> DeviceSnapshot? {
        try CacheStore.loadDevice(id, from: database)
    }

    /// The devices whose info names `gateway` as their gateway.
    public func subDevices(of gateway: String) throws -> [DeviceSnapshot] {
        try CacheStore.loadSubDevices(of: gateway, from: database)
    }

    /// The device's local metadata (name, room, icon, offline warning); defaults when never edited.
    public func metadata(_ id: String) throws -> DeviceMetadata {
        try LocalTables.metadata(id, in: database)
    }

    /// Every edited device's metadata.
    public func allMetadata() throws -> [String: DeviceMetadata] {
        try LocalTables.allMetadata(in: database)
    }

    /// The receive-path counters the daemon last wrote into the file; nil when no daemon ran on it yet.
    public func statistics() throws -> StoredStatistics? {
        StoredStatistics(metaRows: try CacheStore.meta(prefix: "ingest.", in: database))
    }

    /// The device's running or latest firmware upgrade.
    public func upgrade(_ id: String) throws -> OTAUpgrade? {
        try OTAUpgrades.read(database, device: id).first
    }

    /// Every device's latest firmware upgrade, sorted by device id.
    public func upgrades() throws -> [OTAUpgrade] {
        try OTAUpgrades.read(database)
    }

    /// What `devices` lists of every cached device, sorted by id.
    public func listings() throws -> [DeviceListing] {
        try DeviceListing.all(in: database)
    }

    /// Every cached device, sorted by id.
    public func devices() throws -> [DeviceSnapshot] {
        // The ids are sorted and each snapshot moved out once: sorting the snapshots themselves copied them (and
        // retained and released every buffer they hold) at each step of the merge, a quarter of `devices`' time.
        var all = try CacheStore.loadAll(database)
        return all.keys.sorted().compactMap { all.removeValue(forKey: $0) }
    }
}
