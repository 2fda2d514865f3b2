import JSON

/// The device-information model (`ThingDeviceDetailInfo` in the device SDKs), as reported on `R/D/thing/info`.
///
/// It is kept as the ordered JSON object the device reported, validated field by field against `DeviceInfo.fields`,
/// so that partial reports merge key by key and the cache, the CLI and the SDK-style accessors share one schema.
public struct DeviceInfo: Sendable, Equatable {
    public private(set) var devId: String
    /// Validated fields (PROTOCOL.md names), without `devId`. A key present with `.null` is a field reported as null.
    public private(set) var fields: JSONObject

    public init(devId: String, fields: JSONObject = JSONObject()) {
        self.devId = devId
        self.fields = fields
    }

    public var name: String? { fields["name"]?.stringValue }
    public var productId: String? { fields["productId"]?.stringValue }
    public var category: DeviceCategory? { fields["category"]?.stringValue.flatMap(DeviceCategory.init(rawValue:)) }
    public var ip: String? { fields["ip"]?.stringValue }
    public var lanIp: String? { fields["lanIp"]?.stringValue }
    public var mac: String? { fields["mac"]?.stringValue }
    public var timezone: String? { fields["timezone"]?.stringValue }
    public var netStrength: String? { fields["netStrength"]?.stringValue }
    public var wifiSignal: Int? { fields["wifiSignal"]?.int64Value.map(Int.init) }
    public var iccid: String? { fields["iccid"]?.stringValue }
    public var rsrp: Int? { fields["rsrp"]?.int64Value.map(Int.init) }
    public var channel: Int? { fields["channel"]?.int64Value.map(Int.init) }
    public var vendorName: String? { fields["vendorName"]?.stringValue }
    public var homekitCode: String? { fields["homekitCode"]?.stringValue }
    public var connectAbility: ConnectAbility? {
        fields["connectAbility"]?.stringValue.flatMap(ConnectAbility.init(rawValue:))
    }
    public var gatewayId: String? { fields["gatewayId"]?.stringValue }
    public var spaceId: Int64? { fields["spaceId"]?.int64Value }
    public var firmwareVersion: String? { fields["firmwareVersion"]?.stringValue }
    public var abilities: [DeviceAbility] {
        (fields["abilities"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(DeviceAbility.init(rawValue:)) }
    }
    /// Free-form hardware description (module, flash, ...).
    public var hardwareInfo: JSONObject? { fields["hardwareInfo"]?.objectValue }

    public func supports(_ ability: DeviceAbility) -> Bool { abilities.contains(ability) }

    /// The whole model as PROTOCOL.md's JSON object: every known field, null where unknown, in schema order.
    public var json: JSONObject {
        var object = JSONObject()
        object["devId"] = .string(devId)
        for field in Self.fields {
            object[field.key] = fields[field.key] ?? .null
        }
        return object
    }

    /// Merges a (full or partial) report: fields present replace cached ones, absent fields stay.
    /// Throws without changing anything when a field has the wrong type or an unknown enum value.
    public mutating func merge(_ report: JSONObject) throws(PayloadError) {
        var merged = fields
        for (key, value) in report {
            if key == "devId" {
                guard value.stringValue == devId || value.isNull else {
                    throw PayloadError("devId \(value.serialized()) does not match the topic's device")
                }
                continue
            }
            guard let field = Self.fieldsByKey[key] else { continue }  // unknown fields: forward compatible, ignored
            try field.type.validate(value, key: key)
            merged[key] = value
        }
        fields = merged
    }

    mutating func set(_ key: String, _ value: JSONValue) {
        fields[key] = value
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
        Field(key: "productId", column: "product_id", type: .string),
        Field(key: "category", column: "category", type: .oneOf(DeviceCategory.allCases.map(\.rawValue))),
        Field(key: "ip", column: "ip", type: .string),
        Field(key: "lanIp", column: "lan_ip", type: .string),
        Field(key: "mac", column: "mac", type: .string),
        Field(key: "timezone", column: "timezone", type: .string),
        Field(key: "netStrength", column: "net_strength", type: .string),
        Field(key: "wifiSignal", column: "wifi_signal", type: .integer),
        Field(key: "iccid", column: "iccid", type: .string),
        Field(key: "rsrp", column: "rsrp", type: .integer),
        Field(key: "channel", column: "channel", type: .integer),
        Field(key: "vendorName", column: "vendor_name", type: .string),
        Field(key: "homekitCode", column: "homekit_code", type: .string),
        Field(key: "connectAbility", column: "connect_ability",
              type: .oneOf(ConnectAbility.allCases.map(\.rawValue))),
        Field(key: "gatewayId", column: "gateway_id", type: .string),
        Field(key: "spaceId", column: "space_id", type: .integer),
        Field(key: "firmwareVersion", column: "firmware_version", type: .string),
        Field(key: "abilities", column: "abilities", type: .stringArray),
        Field(key: "hardwareInfo", column: "hardware_info", type: .object),
    ]

    static let fieldsByKey: [String: Field] = Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0) })
}
