import JSON
import MQTT
import Synchronization
import ThingAgent

/// What the platform (the agent) sends a TuyaLink device, by topic (`TuyaLinkTopics`, published by the platform).
enum TuyaLinkDownlink: Equatable, Sendable {
    case propertySet
    case actionExecute
    case otaIssue
    /// The platform's answer to what the device sent on that topic (a report's, an event's, a bind's, the time's).
    case answer(TuyaLinkDialect.Topic)

    /// The device a topic `tylink/<id>/<suffix>` is for, and what it carries; nil for a topic no TuyaLink device
    /// reads (what devices publish, heard back on a subscription, among them).
    static func parse(_ topic: String) -> (device: String, downlink: TuyaLinkDownlink)? {
        guard topic.hasPrefix("tylink/") else { return nil }
        let rest = topic.dropFirst("tylink/".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let device = String(rest[..<slash])
        let suffix = rest[rest.index(after: slash)...]
        guard DeviceID.isValid(device), TuyaLinkTopics.all.contains(where: { $0.suffix == suffix && $0.publisher == .agent })
        else { return nil }
        switch suffix {
        case "thing/property/set": return (device, .propertySet)
        case "thing/action/execute": return (device, .actionExecute)
        case "ota/issue": return (device, .otaIssue)
        default:
            guard let answered = TuyaLinkDialect.Topic.allCases.first(where: { $0.answerSuffix.map { $0 == suffix } == true }) else { return nil }
            return (device, .answer(answered))
        }
    }
}

/// A simulated device that speaks TuyaLink as Tuya's C device SDK does (docs/protocol.md, "TuyaLink"): no will and
/// no status; messages `{"msgId","time","data"}` with its own `msgId` counter from "0" at every (re)start and `time`
/// in seconds, QoS 0; property reports `{"code":{"value","time"}}`; a set answered on `set_response` with the set's
/// `msgId` and no code before the values are applied and reported; the action `identify` answered on
/// `execute_response`; its firmware reported when it comes up and after an upgrade; and a gateway that binds its
/// sub-devices, logs them in and speaks for them, on their own `tylink/<sub>/` topics or in its batch reports.
extension VirtualDevice {
    /// `tylink/<id>/<suffix>` of this device (or of `device`).
    private func tuyaLinkTopic(_ suffix: String, of device: String? = nil) -> String {
        "tylink/\(device ?? id)/\(suffix)"
    }

    /// The next `msgId`, as the SDK counts them: a decimal string from "0".
    func nextTuyaLinkID() -> String {
        String(state.withLock { state in
            defer { state.tuyaLinkCounter += 1 }
            return state.tuyaLinkCounter
        })
    }

    /// The device (re)started: its `msgId`s start at "0" again.
    func restartTuyaLinkIDs() {
        state.withLock { $0.tuyaLinkCounter = 0 }
    }

    /// `{"msgId","time","data"}` (and `"sys":{"ack":1}` when it asks for the platform's answer) on `topic` of this
    /// device (or of `device`), QoS 0 as the SDK publishes.
    private func tuyaLinkMessage(_ topic: TuyaLinkDialect.Topic, of device: String? = nil, data: JSONValue,
                                 now: Millis, ack: Bool = false, msgId: String? = nil) -> Publication {
        var pairs: [(String, JSONValue)] = [("msgId", .string(msgId ?? nextTuyaLinkID())), ("time", .integer(now / 1000)),
                                            ("data", data)]
        if ack { pairs.append(("sys", .object(["ack": .integer(1)]))) }
        return Publication(topic: tuyaLinkTopic(topic.suffix, of: device), payload: Self.json(pairs), qos: .atMostOnce)
    }

    /// Coming up: the firmware it runs, every property (asking for the platform's answer), and (a device with a
    /// connection of its own) a time request.
    func tuyaLinkComingOnline(now: Millis) -> [Publication] {
        var messages = [tuyaLinkFirmwareReport(firmwareVersion, now: now)]
        let values = state.withLock { $0.properties }
        if !values.isEmpty { messages.append(tuyaLinkReport(values, now: now, ack: true)) }
        if plan.category != .subdevice { messages.append(tuyaLinkTimeRequest(now: now)) }
        return messages
    }

    /// The gateway a sub-device's next uplink goes through as its batch report: every other one (the first
    /// included), the others on its own topics; nil for a device that is no sub-device.
    private func batchGateway() -> String? {
        guard plan.category == .subdevice else { return nil }
        return state.withLock { state in
            defer { state.tuyaLinkUplinks += 1 }
            return state.tuyaLinkUplinks % 2 == 0 ? state.gatewayId : nil
        }
    }

    /// A batch report of `gateway` carrying one sub-device's `entry` (`deviceId`, `properties` or `events`).
    private func tuyaLinkBatch(_ gateway: String, _ entry: JSONObject, now: Millis) -> Publication {
        tuyaLinkMessage(.batchReport, of: gateway, data: .object(["subDevices": .array([.object(entry)])]), now: now)
    }

    /// `thing/property/report` with `{"code":{"value","time"}}` (time in seconds); a sub-device's every other one in
    /// its gateway's `thing/data/batch_report`.
    func tuyaLinkReport(_ values: [(String, JSONValue)], now: Millis, ack: Bool = false) -> Publication {
        let seconds = JSONValue.integer(now / 1000)
        let properties = JSONObject(values.map { code, value in
            (code, .object(JSONObject([("value", value), ("time", seconds)])))
        })
        if let gateway = batchGateway() {
            return tuyaLinkBatch(gateway, JSONObject([("deviceId", .string(id)), ("properties", .object(properties))]),
                                 now: now)
        }
        return tuyaLinkMessage(.report, data: .object(properties), now: now, ack: ack)
    }

    /// `thing/event/trigger` with `{"eventCode","eventTime","outputParams"}`; a sub-device's every other one in its
    /// gateway's batch report (`events`).
    func tuyaLinkEvent(_ name: String, _ params: JSONObject, now: Millis) -> Publication {
        let seconds = JSONValue.integer(now / 1000)
        if let gateway = batchGateway() {
            let event = JSONObject([("eventTime", seconds), ("outputParams", .object(params))])
            return tuyaLinkBatch(gateway, JSONObject([("deviceId", .string(id)), ("events", .object([name: .object(event)]))]),
                                 now: now)
        }
        return tuyaLinkMessage(.eventTrigger, data: .object(JSONObject([
            ("eventCode", .string(name)), ("eventTime", seconds), ("outputParams", .object(params)),
        ])), now: now)
    }

    /// `ota/firmware/report`: the version of its main module, channel 0.
    func tuyaLinkFirmwareReport(_ version: String, now: Millis) -> Publication {
        tuyaLinkMessage(.firmwareReport, data: .object(JSONObject([
            ("bizType", .string("INIT")),
            ("otaChannel", .array([.object(JSONObject([("channel", .integer(0)), ("version", .string(version))]))])),
        ])), now: now)
    }

    /// `ota/progress/report`: 0 to 100, or -1 with the failure's `errorCode`.
    func tuyaLinkProgress(_ progress: Int, errorCode: String? = nil, now: Millis) -> Publication {
        var data = JSONObject([("channel", .integer(0)), ("progress", .integer(Int64(progress)))])
        if let errorCode { data["errorCode"] = .string(errorCode) }
        return tuyaLinkMessage(.progressReport, data: .object(data), now: now)
    }

    /// `ext/time/request`: the device's send time (`dst`) in milliseconds, which the answer echoes.
    func tuyaLinkTimeRequest(now: Millis) -> Publication {
        tuyaLinkMessage(.timeRequest, data: .object(JSONObject([("bizType", .string("NTP")), ("dst", .integer(now))])),
                        now: now)
    }

    // MARK: a gateway's sub-devices

    /// `device/sub/bind` of `subs`, each by its product and its client id (its hardware id): the platform answers
    /// each one's `deviceId` on `bind_response`. Returns the message and its `msgId`.
    func tuyaLinkBind(_ subs: [VirtualDevice], now: Millis) -> (publication: Publication, msgId: String) {
        let list: [JSONValue] = subs.map { sub in
            .object(JSONObject([("productId", .string(sub.plan.productId)), ("clientId", .string(sub.id))]))
        }
        let msgId = nextTuyaLinkID()
        return (tuyaLinkMessage(.bind, data: .array(list), now: now, msgId: msgId), msgId)
    }

    /// `device/sub/login` of the sub-devices `ids` (their deviceIds, as the bind gave them).
    func tuyaLinkLogin(_ ids: [String], now: Millis) -> Publication {
        tuyaLinkMessage(.login, data: .array(ids.map(JSONValue.string)), now: now)
    }

    /// `device/sub/logout` of the sub-devices `ids`.
    func tuyaLinkLogout(_ ids: [String], now: Millis) -> Publication {
        tuyaLinkMessage(.logout, data: .array(ids.map(JSONValue.string)), now: now)
    }

    // MARK: what the platform asks

    /// What the device does about what the platform sent it.
    func handleTuyaLink(_ downlink: TuyaLinkDownlink, payload: [UInt8], now: Millis) -> Reaction {
        guard let object = try? JSONParser.parse(payload).objectValue, let msgId = object["msgId"] else {
            return Reaction()
        }
        let seconds = JSONValue.integer(now / 1000)
        switch downlink {
        case .propertySet:
            // The SDK's set_response carries the set's msgId and no code (it has none to give); the firmware then
            // applies the values its thing model takes and reports them.
            let answer = Publication(topic: tuyaLinkTopic(TuyaLinkDialect.Topic.setResponse.suffix),
                                     payload: Self.json([("msgId", msgId), ("time", seconds)]), qos: .atMostOnce)
            let applied = applyWhatTheModelTakes(object["data"]?.objectValue ?? [:])
            guard !applied.isEmpty else { return Reaction(publications: [answer]) }
            return Reaction(publications: [answer, tuyaLinkReport(applied, now: now)])
        case .actionExecute:
            // The firmware knows the actions of its product; any other goes unanswered.
            guard object["data"]?["actionCode"]?.stringValue == "identify" else { return Reaction() }
            let times = object["data"]?["inputParams"]?["times"]?.int64Value ?? 3
            return Reaction(publications: [Publication(
                topic: tuyaLinkTopic(TuyaLinkDialect.Topic.executeResponse.suffix),
                payload: Self.json([("msgId", msgId), ("time", seconds), ("data", .object(JSONObject([
                    ("actionCode", .string("identify")), ("outputParams", .object(["blinked": .integer(times)])),
                ])))]), qos: .atMostOnce)])
        case .otaIssue:
            guard let data = object["data"]?.objectValue, let version = data["version"]?.stringValue,
                  FirmwareVersion(version) != nil, data["url"]?.stringValue?.isEmpty == false else { return Reaction() }
            guard FirmwareVersion.isNewer(version, than: firmwareVersion) else {
                return Reaction(publications: [tuyaLinkProgress(
                    -1, errorCode: "\(version) is not newer than the installed \(firmwareVersion)", now: now)])
            }
            // One upgrade at a time: an issue while one runs is ignored, as the firmware would.
            guard beginUpgrade() else { return Reaction() }
            return Reaction(startUpgrade: version)
        case .answer(.bind):
            let ids = (object["data"]?.arrayValue ?? []).compactMap { $0["deviceId"]?.stringValue }
            return Reaction(bound: (msgId.stringValue ?? "", ids))
        case .answer:
            return Reaction()
        }
    }
}

extension Simulator {
    /// A TuyaLink device installs `version`, reporting its progress: 10, 50 and 100 (downloaded, flashing) a step
    /// apart, then it restarts (msgIds from "0" again; a sub-device is logged out and in again by its gateway) and
    /// reports its new firmware. At the failure rate it fails instead: -1 with errorCode `download` after 50,
    /// `verify` instead of 100, `flash` after 100, comes back with the old version (rollback), or stops reporting
    /// after the first step (stall).
    func tuyaLinkUpgrade(_ device: VirtualDevice, to version: String) async {
        await vendorUpgrade(device, to: version, wire: VendorUpgradeWire(
            steps: [10, 50, 100],
            progress: { device.tuyaLinkProgress($0, now: Timestamp.current) },
            failed: { device.tuyaLinkProgress(-1, errorCode: $0.rawValue, now: Timestamp.current) },
            logout: { $0.tuyaLinkLogout([device.id], now: Timestamp.current) },
            login: { $0.tuyaLinkLogin([device.id], now: Timestamp.current) },
            restart: { device.restartTuyaLinkIDs() },
            report: { device.tuyaLinkFirmwareReport(device.firmwareVersion, now: Timestamp.current) }))
    }
}

extension Simulator {
    /// How long a TuyaLink gateway waits for the answer to its bind before it logs its sub-devices in all the same.
    static let bindTimeout: Duration = .seconds(10)

    /// A TuyaLink gateway binds its sub-devices (`device/sub/bind`), waits for the platform's `bind_response` (which
    /// gives each its deviceId), and logs them in by those ids (`device/sub/login`).
    func bindAndLogIn(_ subs: [VirtualDevice], by gateway: VirtualDevice, over connection: SimulatorConnection) async {
        let (bind, msgId) = gateway.tuyaLinkBind(subs, now: Timestamp.current)
        await connection.publish(bind)
        var ids = subs.map(\.id)
        if let bound = await binds.wait(gateway.id, msgId: msgId, timeout: Self.bindTimeout) {
            if Set(bound) != Set(ids) {
                Console.error("simulate: \(gateway.id)'s bind gave the ids \(bound), not the client ids \(ids)")
            }
            ids = bound
        } else {
            Console.error("simulate: \(gateway.id) got no answer to its bind within \(Self.bindTimeout.components.seconds) s (does the "
                          + "agent speak tuyalink?); it logs its sub-devices in all the same")
        }
        await connection.publish(gateway.tuyaLinkLogin(ids, now: Timestamp.current))
    }

    /// A TuyaLink device's connection, as Tuya's SDK makes it: client id `tuyalink_<deviceId>`, user name
    /// `<deviceId>|signMethod=hmacSha256,timestamp=<s>,secureMode=1,accessType=1` and, as password, the HMAC-SHA256
    /// of `deviceId=<id>,timestamp=<s>,secureMode=1,accessType=1` keyed by its device secret (made from the seed);
    /// MQTT 3.1.1, a clean session, no will; on `--tuyalink-broker` when given. No broker here checks that
    /// signature (mosquitto cannot: deploy/mosquitto-tuyalink.conf lets any user name in on its own listener).
    static func tuyaLinkMQTT(_ base: MQTTConfiguration, _ plan: DevicePlan, options: SimulatorOptions) -> MQTTConfiguration {
        var mqtt = base
        let timestamp = Timestamp.current / 1000
        mqtt.clientID = TuyaLinkTopics.clientPrefix + plan.id
        mqtt.username = "\(plan.id)|signMethod=hmacSha256,timestamp=\(timestamp),secureMode=1,accessType=1"
        let content = "deviceId=\(plan.id),timestamp=\(timestamp),secureMode=1,accessType=1"
        let secret = tuyaLinkSecret(plan, seed: options.seed)
        // Without libcrypto (the package depends on it) any password does: no broker here checks it.
        mqtt.password = (try? Digest.hmacSHA256(key: Array(secret.utf8), message: Array(content.utf8)))
            .map(Digest.hex) ?? "unsigned"
        if let brokers = options.tuyaLinkBrokers { mqtt.brokers = brokers }
        mqtt.protocolVersion = .v311
        mqtt.cleanSession = true
        mqtt.sessionExpiry = nil
        mqtt.will = nil
        return mqtt
    }

    /// A TuyaLink device's secret, 16 hex digits from the seed (Tuya gives each device one with its id).
    static func tuyaLinkSecret(_ plan: DevicePlan, seed: UInt64) -> String {
        var generator = SeededGenerator(seed: seed ^ 0x7475_7961_6C69_6E6B, stream: plan.index)
        return Digest.hex((0..<8).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// The answers to TuyaLink gateways' binds, by gateway and msgId: the gateway waits for its own.
final class TuyaLinkBinds: Sendable {
    private let answers = Mutex<[String: [String]]>([:])

    func answered(_ gateway: String, msgId: String, ids: [String]) {
        answers.withLock { $0[gateway + " " + msgId] = ids }
    }

    /// The ids the answer to `gateway`'s bind `msgId` gave; nil when none came within `timeout` (or the task was
    /// cancelled).
    func wait(_ gateway: String, msgId: String, timeout: Duration) async -> [String]? {
        let key = gateway + " " + msgId
        let deadline = ContinuousClock.now + timeout
        while true {
            if let ids = answers.withLock({ $0.removeValue(forKey: key) }) { return ids }
            guard ContinuousClock.now < deadline else { return nil }
            do { try await Task.sleep(for: .milliseconds(20)) } catch { return nil }
        }
    }
}
