import JSON

/// One property value as reported, with the time it was measured.
public struct PropertyValue: Sendable, Equatable {
    public var value: JSONValue
    public var time: Millis

    public init(value: JSONValue, time: Millis) {
        self.value = value
        self.time = time
    }
}

/// A signal level in dBm with the time it was measured.
public struct SignalReading: Sendable, Equatable {
    public var dBm: Int
    public var time: Millis

    public init(dBm: Int, time: Millis) {
        self.dBm = dBm
        self.time = time
    }
}

/// A decoded device-to-agent message (docs/protocol.md, "Payloads").
package enum InboundMessage: Sendable, Equatable {
    case properties([(code: String, value: PropertyValue)])
    /// `via`: how the agent knows (the device said so, or its gateway, its traffic, the broker's client events).
    case status(online: Bool, time: Millis, via: PresenceSource = .announced)
    case signal(wifi: SignalReading?, rsrp: SignalReading?)
    case info(JSONObject, time: Millis)
    case transferStatus(TransferStatusReport)
    case response(Response)
    case unbind(time: Millis)
    case otaProgress(OTAProgressReport)
    /// A device event (a button press, a fault).
    case event(ThingEvent)
    /// Tags (keys and string values an operator or the device attaches) set and removed in the device's
    /// information (`tags`); the others are kept.
    case tags(update: [(key: String, value: JSONValue)], delete: [String], time: Millis)
    /// A question the device asks the platform (its firmware, a gateway's sub-devices), answered from what the
    /// agent knows (`Dialect.answer`).
    case query(DeviceQuery)
    /// A message the dialect answers (`Dialect.replies`) that carries nothing for the cache (an NTP request).
    case answeredOnly
    /// One wire message about other devices (an Alink gateway's login of its sub-devices): each applied to its
    /// device in order.
    indirect case batch([DeviceMessage])

    static package func == (lhs: InboundMessage, rhs: InboundMessage) -> Bool {
        switch (lhs, rhs) {
        case let (.properties(a), .properties(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.code == $1.code && $0.value == $1.value }
        case let (.status(a, t, v), .status(b, u, w)): return a == b && t == u && v == w
        case let (.signal(a, b), .signal(c, d)): return a == c && b == d
        case let (.info(a, t), .info(b, u)): return a == b && t == u
        case let (.transferStatus(a), .transferStatus(b)): return a == b
        case let (.response(a), .response(b)): return a == b
        case let (.unbind(a), .unbind(b)): return a == b
        case let (.otaProgress(a), .otaProgress(b)): return a == b
        case let (.event(a), .event(b)): return a == b
        case let (.tags(a, b, t), .tags(c, d, u)):
            return a.count == c.count && zip(a, c).allSatisfy { $0.key == $1.key && $0.value == $1.value } && b == d
                && t == u
        case let (.query(a), .query(b)): return a == b
        case (.answeredOnly, .answeredOnly): return true
        case let (.batch(a), .batch(b)): return a == b
        default: return false
        }
    }
}

/// A question a device asks the platform.
package struct DeviceQuery: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// The firmware it should run (Alink `thing/ota/firmware/get`): the catalog's image for its product when
        /// newer than the version it reports.
        case firmware
        /// A gateway's sub-devices (Alink `thing/topo/get`, TuyaLink `device/topo/get`): the devices linked to it.
        case subDevices
        /// The thing model of the device's product (TuyaLink `thing/model/get`).
        case thingModel
    }

    package var kind: Kind
    /// The request's id, echoed in the answer.
    package var id: JSONValue

    package init(_ kind: Kind, id: JSONValue) {
        self.kind = kind
        self.id = id
    }
}

/// What the agent knows to answer a `DeviceQuery` with.
package enum QueryAnswer: Sendable {
    case firmware(FirmwareCatalog.Image?)
    case subDevices([(id: String, productId: String?)])
    case thingModel(ThingModel?)
}

/// A message for one device, inside a `.batch`.
package struct DeviceMessage: Sendable, Equatable {
    package var device: String
    package var message: InboundMessage

    package init(_ device: String, _ message: InboundMessage) {
        self.device = device
        self.message = message
    }
}

/// A gateway-replacement progress report from the gateway that takes over.
package struct TransferStatusReport: Sendable, Equatable {
    package var targetDeviceId: String
    package var targetDeviceName: String?
    package var sourceDeviceId: String
    package var status: TransferStatus
    package var failedCode: String
    package var time: Millis
}

/// A device's answer to a request, matched to it by `msgId`.
public struct Response: Sendable, Equatable {
    public var msgId: String
    public var code: Int
    public var message: String?
    public var data: JSONValue?
    public var time: Millis

    package init(msgId: String, code: Int, message: String?, data: JSONValue?, time: Millis) {
        self.msgId = msgId
        self.code = code
        self.message = message
        self.data = data
        self.time = time
    }
}
