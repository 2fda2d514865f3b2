import JSON

/// Everything the agent knows about one device: the latest of each thing it reported.
public struct DeviceSnapshot: Sendable, Equatable {
    public let id: String
    public internal(set) var info: DeviceInfo
    /// Device time of the newest info report merged.
    public internal(set) var infoTime: Millis?
    public internal(set) var properties: PropertyTable
    /// nil until the device reported a status.
    public internal(set) var online: Bool?
    /// Device time of the newest status report.
    public internal(set) var statusTime: Millis?
    /// Device time of the status report that last flipped `online`.
    public internal(set) var statusChangedAt: Millis?
    /// How the agent knows `online`: the device's own status, its gateway's session, its traffic, the broker.
    public internal(set) var presence: PresenceSource?
    public internal(set) var wifiSignal: SignalReading?
    public internal(set) var rsrp: SignalReading?
    /// The latest gateway replacement this device ran as the new gateway.
    public internal(set) var transfer: TransferInfo? {
        get { transferBox?.info }
        set { transferBox = newValue.map(TransferBox.init) }
    }
    /// Boxed: few devices ever run a transfer, and inline it would add a hundred bytes to every device.
    private var transferBox: TransferBox?
    /// The latest event of each name the device reported.
    public internal(set) var events: [String: ThingEvent] = [:]
    /// Agent time of the first valid message.
    public internal(set) var firstSeen: Millis
    /// Agent time of the latest change of any kind.
    public internal(set) var updatedAt: Millis

    public init(id: String, seenAt: Millis) {
        self.init(id: id, info: DeviceInfo(devId: id), seenAt: seenAt)
    }

    package init(id: String, info: DeviceInfo, seenAt: Millis) {
        self.id = id
        self.info = info
        self.properties = PropertyTable()
        self.firstSeen = seenAt
        self.updatedAt = seenAt
    }
}

final package class TransferBox: Sendable, Equatable {
    package let info: TransferInfo

    package init(_ info: TransferInfo) {
        self.info = info
    }

    static package func == (lhs: TransferBox, rhs: TransferBox) -> Bool { lhs.info == rhs.info }
}

/// What applying one message changed, for persistence and listeners.
package struct AppliedChanges: Sendable, Equatable {
    package var properties: [PropertyChange] = []
    package var status: Bool?
    package var wifiSignal: SignalReading?
    package var rsrp: SignalReading?
    package var info = false
    package var transfer: TransferInfo?
    /// Events the device reported (each heard once: a repeat of the latest of its name is not).
    package var events: [ThingEvent] = []
    /// A newer report repeated a value: only its time moved (status, info or transfer time). Nothing to tell
    /// listeners, but the time must reach SQLite, or an older report could win again after a restart.
    package var timesMoved = false
    /// New property codes refused because the device already has `maxProperties` (nothing a listener hears of).
    package var refusedCodes = 0
    /// A transfer `finish` neither started by this agent nor trusted: no sub-device was re-linked.
    package var untrustedFinish = false
    /// A trusted transfer `finish` re-linked the sub-devices of this faulty gateway (its groups, scenes, links and
    /// local fields move with the same write).
    package var replacedGateway: String?

    /// Nothing a listener would hear of (`timesMoved` aside).
    package var isEmpty: Bool {
        properties.isEmpty && status == nil && wifiSignal == nil && rsrp == nil && !info && transfer == nil
            && events.isEmpty
    }

    /// Adds `other`, a later change of the same device.
    mutating package func merge(_ other: AppliedChanges) {
        properties += other.properties
        status = other.status ?? status
        wifiSignal = other.wifiSignal ?? wifiSignal
        rsrp = other.rsrp ?? rsrp
        info = info || other.info
        transfer = other.transfer ?? transfer
        events += other.events
        timesMoved = timesMoved || other.timesMoved
        refusedCodes += other.refusedCodes
        replacedGateway = other.replacedGateway ?? replacedGateway
    }
}

/// A property whose cached value moved, with what it was before.
public struct PropertyChange: Sendable, Equatable {
    public init(code: String, value: JSONValue, time: Millis, previous: JSONValue? = nil) {
        self.code = code
        self.value = value
        self.time = time
        self.previous = previous
    }

    public var code: String
    public var value: JSONValue
    public var time: Millis
    public var previous: JSONValue?

    /// False when only the time moved on.
    public var isValueChange: Bool { previous != value }
}

extension DeviceSnapshot {
    /// Applies one decoded message under docs/protocol.md's rules: stale values lose, a repeat changes nothing.
    /// A device keeps at most `maxProperties` codes: new ones beyond are refused (`refusedCodes`), known ones
    /// still update.
    mutating package func apply(_ message: InboundMessage, now: Millis,
                        maxProperties: Int = .max) throws(PayloadError) -> AppliedChanges {
        var changes = AppliedChanges()
        switch message {
        case .properties(let values):
            for (code, incoming) in values {
                let current = properties[code]
                if let current, incoming.time < current.time || current == incoming { continue }
                if current == nil, properties.count >= maxProperties {
                    changes.refusedCodes += 1
                    continue
                }
                properties[code] = incoming
                // A newer time with the same value still moves the cached time (so it is persisted);
                // listeners only hear of it when the value itself changed (`isValueChange`).
                changes.properties.append(PropertyChange(
                    code: code, value: incoming.value, time: incoming.time, previous: current?.value))
            }
        case .status(let isOnline, let time, let via):
            if let statusTime, time < statusTime || (time == statusTime && online == isOnline) { break }
            statusTime = time
            presence = via
            changes.timesMoved = true
            if online != isOnline {
                online = isOnline
                statusChangedAt = time
                changes.status = isOnline
            }
        case .signal(let wifi, let lte):
            applySignal(wifi, lte, into: &changes)
        case .info(var report, let time):
            // Validated before the staleness check, so that a report of the wrong shape is dropped as malformed
            // whatever its time (docs/protocol.md), not passed over as stale.
            let wifi = try PayloadDecoder.dBm(report["wifiSignal"], key: "wifiSignal")
            let lte = try PayloadDecoder.dBm(report["rsrp"], key: "rsrp")
            report["wifiSignal"] = nil
            report["rsrp"] = nil
            var merged = info
            try merged.merge(report)
            if let infoTime, time < infoTime { break }
            changes.timesMoved = changes.timesMoved || infoTime != time
            infoTime = time
            changes.info = merged != info
            info = merged
            applySignal(wifi.map { SignalReading(dBm: $0, time: time) },
                        lte.map { SignalReading(dBm: $0, time: time) }, into: &changes)
        case .transferStatus(let report):
            if let transfer, report.time < transfer.time { break }
            let next = TransferInfo(
                sourceDeviceId: id, targetDeviceId: report.targetDeviceId,
                targetDeviceName: report.targetDeviceName ?? transfer?.targetDeviceName,
                status: report.status, failedCode: report.failedCode, time: report.time, updatedAt: now)
            if var current = transfer, current.status == next.status, current.targetDeviceId == next.targetDeviceId,
               current.failedCode == next.failedCode {
                changes.timesMoved = changes.timesMoved || current.time != next.time
                current.time = next.time
                transfer = current
                break
            }
            transfer = next
            changes.transfer = next
        case .event(let event):
            // The latest of each name is kept; an older one is not heard, nor a repeat (a QoS 1 redelivery).
            if let current = events[event.name], event.time < current.time || current == event { break }
            events[event.name] = event
            changes.events.append(event)
        case .tags(let update, let delete, let time):
            if let infoTime, time < infoTime { break }
            var tags = info["tags"]?.objectValue ?? JSONObject()
            for (key, value) in update { tags[key] = value }
            for key in delete { tags[key] = nil }
            let next: JSONValue = tags.isEmpty ? .null : .object(tags)
            changes.timesMoved = changes.timesMoved || infoTime != time
            infoTime = time
            if (info["tags"] ?? .null) != next {
                info.set("tags", next)
                changes.info = true
            }
        case .response, .unbind, .otaProgress, .answeredOnly, .query, .batch:  // not part of the snapshot (`OTAUpgrades` keeps upgrades)
            break
        }
        if !changes.isEmpty { updatedAt = now }
        return changes
    }

    private mutating func applySignal(_ wifi: SignalReading?, _ lte: SignalReading?, into changes: inout AppliedChanges) {
        if let wifi, Self.isNewer(wifi, than: wifiSignal) {
            wifiSignal = wifi
            info.set("wifiSignal", .integer(Int64(wifi.dBm)))
            changes.wifiSignal = wifi
        }
        if let lte, Self.isNewer(lte, than: rsrp) {
            rsrp = lte
            info.set("rsrp", .integer(Int64(lte.dBm)))
            changes.rsrp = lte
        }
    }

    /// Stale values lose and a repeat changes nothing; a different value at the same time wins.
    private static func isNewer(_ reading: SignalReading, than cached: SignalReading?) -> Bool {
        guard let cached else { return true }
        return reading.time > cached.time || (reading.time == cached.time && reading.dBm != cached.dBm)
    }
}
