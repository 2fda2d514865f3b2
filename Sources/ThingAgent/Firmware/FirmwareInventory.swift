import JSON
import ThingAgentCore

/// Which devices run what, against the catalog: per product and reported version, how many devices are online and
/// offline and whether that version is behind the catalog's; and the devices that are behind.
public struct FirmwareInventory: Sendable, Equatable {
    public struct Row: Sendable, Equatable {
        /// nil for devices that reported no product.
        public var productId: String?
        /// nil for devices that reported no `firmwareVersion`.
        public var version: String?
        public var online = 0
        public var offline = 0
        /// Devices whose status was never reported.
        public var unknown = 0
        /// The catalog's version for the product, when it has one.
        public var latest: String?
        /// The catalog has a newer version than `version`.
        public var outdated: Bool

        public var devices: Int { online + offline + unknown }
    }

    /// A device that is behind the catalog.
    public struct Outdated: Sendable, Equatable {
        public var deviceId: String
        public var productId: String
        public var version: String?
        public var latest: String
        /// nil when the device's status was never reported.
        public var online: Bool?
    }

    public var rows: [Row]
    public var outdated: [Outdated]

    /// `product`, when given, keeps only that product's devices.
    public init(devices: [DeviceSnapshot], catalog: FirmwareCatalog, product: String? = nil) {
        struct Key: Hashable { var product: String?; var version: String? }
        var grouped: [Key: Row] = [:]
        var behind: [Outdated] = []
        for device in devices {
            let productId = device.info.productId
            if let product, productId != product { continue }
            let version = device.info.firmwareVersion
            let latest = catalog.latest(for: productId)
            let isBehind = latest.map { FirmwareVersion.isNewer($0.version, than: version) } ?? false
            var row = grouped[Key(product: productId, version: version)]
                ?? Row(productId: productId, version: version, latest: latest?.version, outdated: isBehind)
            switch device.online {
            case true?: row.online += 1
            case false?: row.offline += 1
            case nil: row.unknown += 1
            }
            grouped[Key(product: productId, version: version)] = row
            if isBehind, let productId, let latest {
                behind.append(Outdated(deviceId: device.id, productId: productId, version: version,
                                       latest: latest.version, online: device.online))
            }
        }
        rows = grouped.values.sorted { a, b in
            if a.productId != b.productId { return (a.productId ?? "") < (b.productId ?? "") }
            switch (a.version.flatMap(FirmwareVersion.init), b.version.flatMap(FirmwareVersion.init)) {
            case let (l?, r?) where l != r: return l > r
            default: return (a.version ?? "") > (b.version ?? "")
            }
        }
        outdated = behind.sorted { ($0.productId, $0.deviceId) < ($1.productId, $1.deviceId) }
    }

    /// The inventory as JSON: `{"products":[...], "outdated":[...]}` (the CLI's `--json`, the API's `firmware`).
    public var json: JSONObject {
        func optional(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }
        return JSONObject([
            ("products", .array(rows.map { row in
                .object(JSONObject([
                    ("productId", optional(row.productId)), ("version", optional(row.version)),
                    ("devices", .integer(Int64(row.devices))), ("online", .integer(Int64(row.online))),
                    ("offline", .integer(Int64(row.offline))), ("unknown", .integer(Int64(row.unknown))),
                    ("latest", optional(row.latest)), ("outdated", .bool(row.outdated)),
                ]))
            })),
            ("outdated", .array(outdated.map { device in
                .object(JSONObject([
                    ("devId", .string(device.deviceId)), ("productId", .string(device.productId)),
                    ("version", optional(device.version)), ("latest", .string(device.latest)),
                    ("online", device.online.map(JSONValue.bool) ?? .null),
                ]))
            })),
        ])
    }
}
