import SQLite

/// What `thing-agent devices` lists of a device, read straight from its row: building the whole snapshot of each
/// of 100,000 devices (every info field, every property value parsed) and keying them by id was most of the
/// command's time, for seven columns.
public struct DeviceListing: Sendable, Equatable {
    public var id: String
    public var name: String?
    public var category: DeviceCategory?
    public var online: Bool?
    /// The Wi-Fi level in dBm, when the cache has it and when it came (as `DeviceSnapshot.wifiSignal`).
    public var wifiSignal: Int?
    public var propertyCount: Int
    public var updatedAt: Millis
    public var gatewayId: String?

    /// Every device, sorted by id (as `CacheReader.devices()` sorts its snapshots).
    static package func all(in database: Database) throws -> [DeviceListing] {
        let select = try database.prepare("""
            SELECT d.dev_id, d.name, d.category, d.online, d.wifi_signal, d.wifi_signal_time, d.updated_at,
                   d.gateway_id, (SELECT count(*) FROM properties p WHERE p.dev_id = d.dev_id)
            FROM devices d
            """)
        var listings: [DeviceListing] = []
        while try select.step() {
            listings.append(DeviceListing(
                id: select.string(0) ?? "", name: select.string(1),
                category: select.string(2).flatMap(DeviceCategory.init(rawValue:)),
                online: select.isNull(3) ? nil : select.int64(3) != 0,
                wifiSignal: select.isNull(4) || select.isNull(5) ? nil : select.int(4),
                propertyCount: select.int(8), updatedAt: select.int64(6), gatewayId: select.string(7)))
        }
        // The rows come in the file's order; sorting indices moves each listing once instead of at every merge.
        let order = listings.indices.sorted { listings[$0].id < listings[$1].id }
        return order.map { listings[$0] }
    }
}
