import JSON

/// The device-information model (`ThingDeviceDetailInfo` in the device SDKs), as reported on `R/D/thing/info`.
///
/// One JSON value per field of `DeviceInfo.fields` (null when unknown), validated field by field, so that partial
/// reports merge key by key and the cache, the CLI and the SDK-style accessors share one schema. Packed into bytes
/// (`FieldStorage`): a million cached devices make every byte per device count. The signal levels, which change
/// with every signal report, live beside the packed fields so that a report does not re-pack them.
public struct DeviceInfo: Sendable, Equatable {
    public private(set) var devId: String
    private var storage: FieldStorage
    private var signal: (wifi: Int64?, rsrp: Int64?) = (nil, nil)

    public init(devId: String, fields: JSONObject = JSONObject()) {
        self.devId = devId
        guard !fields.isEmpty else {
            storage = FieldStorage(count: Self.fields.count)
            return
        }
        var values = [JSONValue](repeating: .null, count: Self.fields.count)
        for (key, value) in fields {
            if let index = Self.indexByKey[key] { values[index] = value }
        }
        self.storage = FieldStorage(count: 0)
        self.setAll(values)
    }

    /// From packed fields (the cache load); the signal levels are set apart, as they are stored apart.
    package init(devId: String, storage: FieldStorage, wifiSignal: Int64?, rsrp: Int64?) {
        self.devId = devId
        self.storage = storage
        self.signal = (wifiSignal, rsrp)
    }


    public static func == (lhs: DeviceInfo, rhs: DeviceInfo) -> Bool {
        lhs.devId == rhs.devId && lhs.storage == rhs.storage && lhs.signal == rhs.signal
    }

    /// The known fields as a JSON object (docs/protocol.md names, without `devId`), in schema order.
    public var fields: JSONObject {
        var object = JSONObject()
        for (index, value) in allValues.enumerated() where !value.isNull {
            object[Self.fields[index].key] = value
        }
        return object
    }

    /// The value of one field by its docs/protocol.md name; nil when unknown.
    public subscript(_ key: String) -> JSONValue? {
        guard let index = Self.indexByKey[key] else { return nil }
        let value = value(at: index)
        return value.isNull ? nil : value
    }

    package func value(at index: Int) -> JSONValue {
        switch index {
        case Self.wifiIndex: signal.wifi.map(JSONValue.integer) ?? .null
        case Self.rsrpIndex: signal.rsrp.map(JSONValue.integer) ?? .null
        default: storage.value(at: index)
        }
    }

    private var allValues: [JSONValue] {
        var values = storage.all
        values[Self.wifiIndex] = value(at: Self.wifiIndex)
        values[Self.rsrpIndex] = value(at: Self.rsrpIndex)
        return values
    }

    private mutating func setAll(_ values: [JSONValue]) {
        var packed = values
        signal = (values[Self.wifiIndex].int64Value, values[Self.rsrpIndex].int64Value)
        packed[Self.wifiIndex] = .null
        packed[Self.rsrpIndex] = .null
        storage = FieldStorage(packed)
    }

    static package let wifiIndex = indexByKey["wifiSignal"]!
    static package let rsrpIndex = indexByKey["rsrp"]!

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

    /// The whole model as docs/protocol.md's JSON object: every known field, null where unknown, in schema order.
    public var json: JSONObject {
        var object = JSONObject()
        object["devId"] = .string(devId)
        for (index, value) in allValues.enumerated() {
            object[Self.fields[index].key] = value
        }
        return object
    }

    /// Merges a (full or partial) report: fields present replace cached ones (`null` clears one), absent fields stay.
    /// Integer fields are stored as integers. Throws without changing anything when a field has the wrong type or an unknown enum value.
    public mutating func merge(_ report: JSONObject) throws(PayloadError) {
        var merged = allValues
        for (key, value) in report {
            if key == "devId" {
                guard value.stringValue == devId || value.isNull else {
                    throw PayloadError("devId \(value.serialized()) does not match the topic's device")
                }
                continue
            }
            guard let index = Self.indexByKey[key] else { continue }  // unknown fields: forward compatible, ignored
            let type = Self.fields[index].type
            try type.validate(value, key: key)
            // An integer field given as an integral double (`1e1`, `10.0`) is kept as the integer it is, as the
            // cache file keeps it: memory and the file must agree (found by scripts/fuzz).
            merged[index] = type.isInteger ? value.int64Value.map(JSONValue.integer) ?? value : value
        }
        setAll(merged)
    }

    mutating package func set(_ key: String, _ value: JSONValue) {
        guard let index = Self.indexByKey[key] else { return }
        switch index {
        case Self.wifiIndex: signal.wifi = value.int64Value
        case Self.rsrpIndex: signal.rsrp = value.int64Value
        default: storage.set([(index, value)])
        }
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
    /// One info field: its docs/protocol.md key, its cache column and the JSON type it must have.
    package struct Field: Sendable {
        let key: String
        let column: String
        let type: FieldType
    }

    package enum FieldType: Sendable {
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

    /// Every field of the model, in docs/protocol.md's order. The cache has one column per field.
    static package let fields: [Field] = [
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
        /// Keys and values attached to the device (Alink's device tags); `tags` replaces them all in an info report.
        Field(key: "tags", column: "tags", type: .object),
        /// The wire dialect it speaks (`tuyalink`, `alink`; none for a native device), recorded when the agent
        /// first hears it: requests go out in it (`Dialects.dialect(for:info:)`).
        Field(key: "dialect", column: "dialect", type: .string),
    ]

    static package let indexByKey: [String: Int] = Dictionary(uniqueKeysWithValues: fields.enumerated().map { ($1.key, $0) })
}
