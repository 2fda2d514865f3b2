import JSON

/// The device-information model (`ThingDeviceDetailInfo` in the device SDKs), as reported on `R/D/thing/info`.
///
/// Stored as one JSON value per field of `DeviceInfo.fields` (`.null` when unknown), validated field by field, so that
/// partial reports merge key by key and the cache, the CLI and the SDK-style accessors share one schema. An indexed
/// array rather than a JSON object: a million cached devices make every byte per device count.
public struct DeviceInfo: Sendable, Equatable {
    public private(set) var devId: String
    private var values: [JSONValue]

    public init(devId: String, fields: JSONObject = JSONObject()) {
        self.devId = devId
        self.values = Array(repeating: .null, count: Self.fields.count)
        for (key, value) in fields {
            if let index = Self.indexByKey[key] { values[index] = value }
        }
    }

    /// The known fields as a JSON object (PROTOCOL.md names, without `devId`), in schema order.
    public var fields: JSONObject {
        var object = JSONObject()
        for (index, field) in Self.fields.enumerated() where !values[index].isNull {
            object[field.key] = values[index]
        }
        return object
    }

    /// The value of one field by its PROTOCOL.md name; nil when unknown.
    public subscript(_ key: String) -> JSONValue? {
        guard let index = Self.indexByKey[key], !values[index].isNull else { return nil }
        return values[index]
    }

    func value(at index: Int) -> JSONValue { values[index] }

    public var name: String? { self["name"]?.stringValue }
    public var productId: String? { self["productId"]?.stringValue }
    public var category: DeviceCategory? { self["category"]?.stringValue.flatMap(DeviceCategory.init(rawValue:)) }
    public var ip: String? { self["ip"]?.stringValue }
    public var lanIp: String? { self["lanIp"]?.stringValue }
    public var mac: String? { self["mac"]?.stringValue }
    public var timezone: String? { self["timezone"]?.stringValue }
    public var netStrength: String? { self["netStrength"]?.stringValue }
    public var wifiSignal: Int? { self["wifiSignal"]?.int64Value.map(Int.init) }
    public var iccid: String? { self["iccid"]?.stringValue }
    public var rsrp: Int? { self["rsrp"]?.int64Value.map(Int.init) }
    public var channel: Int? { self["channel"]?.int64Value.map(Int.init) }
    public var vendorName: String? { self["vendorName"]?.stringValue }
    public var homekitCode: String? { self["homekitCode"]?.stringValue }
    public var connectAbility: ConnectAbility? {
        self["connectAbility"]?.stringValue.flatMap(ConnectAbility.init(rawValue:))
    }
    public var gatewayId: String? { self["gatewayId"]?.stringValue }
    public var spaceId: Int64? { self["spaceId"]?.int64Value }
    public var firmwareVersion: String? { self["firmwareVersion"]?.stringValue }
    public var abilities: [DeviceAbility] {
        (self["abilities"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(DeviceAbility.init(rawValue:)) }
    }
    /// Free-form hardware description (module, flash, ...).
    public var hardwareInfo: JSONObject? { self["hardwareInfo"]?.objectValue }

    public func supports(_ ability: DeviceAbility) -> Bool { abilities.contains(ability) }

    /// The whole model as PROTOCOL.md's JSON object: every known field, null where unknown, in schema order.
    public var json: JSONObject {
        var object = JSONObject()
        object["devId"] = .string(devId)
        for (index, field) in Self.fields.enumerated() {
            object[field.key] = values[index]
        }
        return object
    }

    /// Merges a (full or partial) report: fields present replace cached ones (`null` clears one), absent fields stay.
    /// Throws without changing anything when a field has the wrong type or an unknown enum value.
    public mutating func merge(_ report: JSONObject) throws(PayloadError) {
        var merged = values
        for (key, value) in report {
            if key == "devId" {
                guard value.stringValue == devId || value.isNull else {
                    throw PayloadError("devId \(value.serialized()) does not match the topic's device")
                }
                continue
            }
            guard let index = Self.indexByKey[key] else { continue }  // unknown fields: forward compatible, ignored
            try Self.fields[index].type.validate(value, key: key)
            merged[index] = value
        }
        values = merged
    }

    mutating func set(_ key: String, _ value: JSONValue) {
        if let index = Self.indexByKey[key] { values[index] = value }
    }

    mutating func set(at index: Int, _ value: JSONValue) {
        values[index] = value
    }
}

public enum DeviceCategory: String, Sendable, CaseIterable {
    case gateway, subdevice, device
}

public enum ConnectAbility: String, Sendable, CaseIterable {
    case unknown, phone, gateway, phoneAndGateway
}

public enum DeviceAbility: String, Sendable, CaseIterable {
    /// Answers `R/D/thing/wifi/scan`.
    case wifiList
    /// Can take over the sub-devices of a faulty gateway.
    case gatewayTransfer
}

extension DeviceInfo {
    /// One info field: its PROTOCOL.md key, its cache column and the JSON type it must have.
    struct Field: Sendable {
        let key: String
        let column: String
        let type: FieldType
        /// Values many devices share (a product id, a firmware version): cached once, not once per device.
        var shared = false
    }

    enum FieldType: Sendable {
        case string, integer, stringArray, object
        case oneOf([String])

        func validate(_ value: JSONValue, key: String) throws(PayloadError) {
            if value.isNull { return }
            let ok: Bool
            switch self {
            case .string: ok = value.stringValue != nil
            case .integer: ok = value.int64Value != nil
            case .object: ok = value.objectValue != nil
            case .stringArray: ok = value.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false
            case .oneOf(let allowed): ok = value.stringValue.map(allowed.contains) ?? false
            }
            guard ok else { throw PayloadError("info field '\(key)' has the wrong type or value: \(value.serialized())") }
        }

        var isInteger: Bool {
            if case .integer = self { return true }
            return false
        }
    }

    /// Every field of the model, in PROTOCOL.md's order. The cache has one column per field.
    static let fields: [Field] = [
        Field(key: "name", column: "name", type: .string),
        Field(key: "productId", column: "product_id", type: .string, shared: true),
        Field(key: "category", column: "category", type: .oneOf(DeviceCategory.allCases.map(\.rawValue)), shared: true),
        Field(key: "ip", column: "ip", type: .string),
        Field(key: "lanIp", column: "lan_ip", type: .string),
        Field(key: "mac", column: "mac", type: .string),
        Field(key: "timezone", column: "timezone", type: .string, shared: true),
        Field(key: "netStrength", column: "net_strength", type: .string, shared: true),
        Field(key: "wifiSignal", column: "wifi_signal", type: .integer),
        Field(key: "iccid", column: "iccid", type: .string),
        Field(key: "rsrp", column: "rsrp", type: .integer),
        Field(key: "channel", column: "channel", type: .integer),
        Field(key: "vendorName", column: "vendor_name", type: .string, shared: true),
        Field(key: "homekitCode", column: "homekit_code", type: .string),
        Field(key: "connectAbility", column: "connect_ability",
              type: .oneOf(ConnectAbility.allCases.map(\.rawValue)), shared: true),
        Field(key: "gatewayId", column: "gateway_id", type: .string, shared: true),
        Field(key: "spaceId", column: "space_id", type: .integer),
        Field(key: "firmwareVersion", column: "firmware_version", type: .string, shared: true),
        Field(key: "abilities", column: "abilities", type: .stringArray, shared: true),
        Field(key: "hardwareInfo", column: "hardware_info", type: .object, shared: true),
    ]

    static let indexByKey: [String: Int] = Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($1.key, $0) })
}
