import JSON

/// What listeners hear: one change to one device.
public enum DeviceEvent: Sendable, Equatable {
    /// Property values changed (a report that only repeats values is not an event).
    case propertiesChanged(deviceId: String, changes: [PropertyChange])
    /// The device went online or offline.
    case statusChanged(deviceId: String, online: Bool, time: Millis)
    /// A new Wi-Fi signal (`wifiSignalDidUpdate`) and/or LTE RSRP reading.
    case signalUpdated(deviceId: String, wifiSignal: SignalReading?, rsrp: SignalReading?)
    /// The device information changed.
    case infoChanged(deviceId: String, info: DeviceInfo)
    /// Gateway-replacement progress (`statusDidUpdate`); `deviceId` is the gateway that takes over.
    case transferStatusChanged(deviceId: String, info: TransferInfo)
    /// The device went offline and stayed offline longer than the grace period.
    case offlineWarning(deviceId: String, offlineSince: Millis)
    /// A device that had an offline warning is online again, after `away` milliseconds (agent time).
    case backOnline(deviceId: String, offlineSince: Millis, away: Millis)
    /// A firmware upgrade started, moved on or ended (`OTAManager`'s `statusDidUpdate`).
    case upgradeChanged(deviceId: String, upgrade: OTAUpgrade)
    /// A member of a multi-control link reported a new value and the link set the other members (`deviceId` is
    /// the member that reported it).
    case linkPropagated(deviceId: String, propagation: LinkPropagation)
    /// The device reported an event (a button press, a fault), in any dialect.
    case eventReported(deviceId: String, event: ThingEvent)
    /// A device was activated with a pairing (`pairing` is its bootstrap user name; `gatewayId` for a sub-device).
    case activated(deviceId: String, pairing: String, gatewayId: String?)
    /// A command for the device from an integration (Home Assistant) was refused or failed: malformed, refused by
    /// the thing model or the device, or unanswered. What the device shows is unchanged.
    case commandRefused(deviceId: String, refusal: CommandRefusal)

    public var deviceId: String {
        switch self {
        case .propertiesChanged(let id, _), .statusChanged(let id, _, _), .signalUpdated(let id, _, _),
             .infoChanged(let id, _), .transferStatusChanged(let id, _), .offlineWarning(let id, _),
             .backOnline(let id, _, _), .upgradeChanged(let id, _), .linkPropagated(let id, _),
             .activated(let id, _, _), .eventReported(let id, _), .commandRefused(let id, _):
            id
        }
    }

    public var kind: DeviceEventKinds {
        switch self {
        case .propertiesChanged: .properties
        case .statusChanged: .status
        case .signalUpdated: .signal
        case .infoChanged: .info
        case .transferStatusChanged: .transfer
        case .offlineWarning: .offlineWarning
        case .backOnline: .backOnline
        case .upgradeChanged: .ota
        case .linkPropagated: .link
        case .activated: .activated
        case .eventReported: .events
        case .commandRefused: .commands
        }
    }
}

/// A command from an integration that did not do what it asked, and why.
public struct CommandRefusal: Sendable, Equatable {
    /// Who sent it: `homeAssistant`.
    public var source: String
    /// What it asked, as received (at most 256 bytes of it).
    public var command: String
    /// How it ended: `invalid` (malformed or refused by the thing model, nothing sent), or a request's outcome
    /// (`refused`, `timeout`, `offline`, `notSent`, ...).
    public var outcome: String
    public var message: String
    /// Agent time of the refusal.
    public var time: Millis

    public init(source: String, command: String, outcome: String, message: String, time: Millis) {
        self.source = source
        self.command = command
        self.outcome = outcome
        self.message = message
        self.time = time
    }
}

/// A set of event kinds, to listen to only some.
public struct DeviceEventKinds: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let properties = DeviceEventKinds(rawValue: 1 << 0)
    public static let status = DeviceEventKinds(rawValue: 1 << 1)
    public static let signal = DeviceEventKinds(rawValue: 1 << 2)
    public static let info = DeviceEventKinds(rawValue: 1 << 3)
    public static let transfer = DeviceEventKinds(rawValue: 1 << 4)
    public static let offlineWarning = DeviceEventKinds(rawValue: 1 << 5)
    /// The return of a device that had an offline warning.
    public static let backOnline = DeviceEventKinds(rawValue: 1 << 6)
    /// Firmware-upgrade changes.
    public static let ota = DeviceEventKinds(rawValue: 1 << 7)
    /// Devices activated with a pairing.
    public static let activated = DeviceEventKinds(rawValue: 1 << 8)
    /// Multi-control link propagations. (A new bit: the existing kinds keep their values.)
    public static let link = DeviceEventKinds(rawValue: 1 << 9)
    /// Events the devices reported (`ThingEvent`).
    public static let events = DeviceEventKinds(rawValue: 1 << 10)
    /// Integration commands refused or failed (`CommandRefusal`).
    public static let commands = DeviceEventKinds(rawValue: 1 << 11)
    public static let all: DeviceEventKinds = [
        .properties, .status, .signal, .info, .transfer, .offlineWarning, .backOnline, .ota, .link, .activated,
        .events, .commands,
    ]
}

extension AppliedChanges {
    /// The listener events for these changes, in a fixed order.
    package func events(for device: DeviceSnapshot) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        if info { events.append(.infoChanged(deviceId: device.id, info: device.info)) }
        if let online = status {
            events.append(.statusChanged(deviceId: device.id, online: online, time: device.statusTime ?? 0))
        }
        let changed = properties.filter(\.isValueChange)
        if !changed.isEmpty { events.append(.propertiesChanged(deviceId: device.id, changes: changed)) }
        if wifiSignal != nil || rsrp != nil {
            events.append(.signalUpdated(deviceId: device.id, wifiSignal: wifiSignal, rsrp: rsrp))
        }
        if let transfer { events.append(.transferStatusChanged(deviceId: device.id, info: transfer)) }
        for event in self.events { events.append(.eventReported(deviceId: device.id, event: event)) }
        return events
    }
}
