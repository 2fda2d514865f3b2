import JSON
import ThingAgentCore

extension DeviceEvent {
    /// The event as the daemon published it on its feed (`EventPublisher.payload`), read back: what a client beside
    /// the daemon gets from `AgentClient.events(device:kinds:)`. Nil for a payload that is not such an event.
    /// A firmware upgrade's image carries only what the feed says of it (version and URL, no checksum).
    public init?(feed payload: JSONValue) {
        guard let device = payload["devId"]?.stringValue, let kind = payload["event"]?.stringValue else { return nil }
        let time = payload["time"]?.int64Value ?? 0
        switch kind {
        case "properties":
            guard let data = payload["data"]?.objectValue else { return nil }
            let changes = data.map { code, change in
                PropertyChange(code: code, value: change["value"] ?? .null, time: change["time"]?.int64Value ?? time,
                               previous: change["previous"].flatMap { $0.isNull ? nil : $0 })
            }
            self = .propertiesChanged(deviceId: device, changes: changes)
        case "status":
            guard let online = payload["online"]?.boolValue else { return nil }
            self = .statusChanged(deviceId: device, online: online, time: payload["statusTime"]?.int64Value ?? time)
        case "signal":
            func reading(_ level: String, _ at: String) -> SignalReading? {
                payload[level]?.int64Value.map { SignalReading(dBm: Int($0), time: payload[at]?.int64Value ?? time) }
            }
            self = .signalUpdated(deviceId: device, wifiSignal: reading("wifiSignal", "wifiSignalTime"),
                                  rsrp: reading("rsrp", "rsrpTime"))
        case "info":
            guard let data = payload["data"]?.objectValue else { return nil }
            self = .infoChanged(deviceId: device, info: DeviceInfo(devId: device, fields: data))
        case "transfer":
            guard let info = TransferInfo(json: payload["data"], updatedAt: time) else { return nil }
            self = .transferStatusChanged(deviceId: device, info: info)
        case "offline":
            guard let since = payload["offlineSince"]?.int64Value else { return nil }
            self = .offlineWarning(deviceId: device, offlineSince: since)
        case "online":
            guard let since = payload["offlineSince"]?.int64Value, let away = payload["awayMs"]?.int64Value else {
                return nil
            }
            self = .backOnline(deviceId: device, offlineSince: since, away: away)
        case "ota":
            guard let upgrade = OTAUpgrade(feed: payload["data"], device: device) else { return nil }
            self = .upgradeChanged(deviceId: device, upgrade: upgrade)
        case "link":
            guard let data = payload["data"], let link = data["link"]?.stringValue,
                  let source = data["source"]?.stringValue, let code = data["code"]?.stringValue else { return nil }
            func members(_ key: String) -> [String] { (data[key]?.arrayValue ?? []).compactMap(\.stringValue) }
            self = .linkPropagated(deviceId: device, propagation: LinkPropagation(
                link: link, source: source, code: code, value: data["value"] ?? .null, sent: members("sent"),
                offline: members("offline"), outOfRange: members("outOfRange")))
        case "activated":
            guard let pairing = payload["pairing"]?.stringValue else { return nil }
            self = .activated(deviceId: device, pairing: pairing, gatewayId: payload["gatewayId"]?.stringValue)
        case "event":
            guard let event = ThingEvent(json: payload["data"]) else { return nil }
            self = .eventReported(deviceId: device, event: event)
        case "command":
            guard let refusal = CommandRefusal(json: payload["data"]) else { return nil }
            self = .commandRefused(deviceId: device, refusal: refusal)
        default:
            return nil
        }
    }
}

extension OTAUpgrade {
    /// An upgrade as the event feed carries it (`json`).
    init?(feed json: JSONValue?, device: String) {
        guard let json, let version = json["version"]?.stringValue,
              let stage = json["stage"]?.stringValue.flatMap(OTAStage.init(rawValue:)) else { return nil }
        let updatedAt = json["updatedAt"]?.int64Value ?? 0
        self.init(deviceId: device, fromVersion: json["fromVersion"]?.stringValue,
                  image: FirmwareCatalog.Image(version: version, url: json["url"]?.stringValue ?? "", sha256: ""),
                  stage: stage, progress: Int(json["progress"]?.int64Value ?? 0),
                  failedCode: json["failedCode"]?.stringValue ?? "", startedAt: json["startedAt"]?.int64Value ?? 0,
                  updatedAt: updatedAt, reportTime: updatedAt, endedAt: json["endedAt"]?.int64Value)
    }
}
