import JSON
import MQTT
import Synchronization
import ThingAgent

/// One message a simulated device sends.
struct Publication: Sendable {
    var topic: String
    var payload: [UInt8]
    var qos: QoS = .atLeastOnce
    var retain = false
}

/// One simulated device: its state and the messages it sends, as docs/protocol.md describes them. Pure apart from the
/// lock: the simulator decides when, and over which connection, the messages go out.
final class VirtualDevice: Sendable {
    let plan: DevicePlan
    let model: ThingModel?
    let topics: Topics

    struct State {
        var generator: SeededGenerator
        /// In model order, so that reports read the same every run.
        var properties: [(code: String, value: JSONValue)] = []
        /// Settings somebody set with a request: the device keeps them (nobody at the device changes them back at
        /// random), so a set is not undone a few seconds later.
        var kept: Set<String> = []
        var wifiSignal: Int?
        var gatewayId: String?
        var networks: [(ssid: String, rssi: Int, sec: Int)] = []
        var transferRunning = false
        /// The firmware installed: the plan's, until an upgrade replaces it.
        var firmwareVersion: String
        var upgradeRunning = false
        var messageCounter = 0
        /// Alink's request ids: "1" again after every (re)start of the device.
        var alinkCounter = 0
        /// TuyaLink's `msgId`s: "0" again after every (re)start of the device.
        var tuyaLinkCounter = 0
        /// A TuyaLink sub-device's uplinks so far: the even ones go in its gateway's batch report, the odd ones on its
        /// own topics.
        var tuyaLinkUplinks = 0
    }
    let state: Mutex<State>

    /// `facts`: values of report-only properties that the fleet decides (a gateway's channel, its sub-devices).
    init(plan: DevicePlan, model: ThingModel?, topics: Topics, seed: UInt64, facts: [String: JSONValue] = [:]) {
        self.plan = plan
        self.model = model
        self.topics = topics
        // A stream apart from the one that made the plan, so plan and values do not share draws.
        var generator = SeededGenerator(seed: seed ^ 0x5EED_0F_DA7A, stream: plan.index)
        var initial = State(generator: generator, gatewayId: plan.gatewayId, firmwareVersion: plan.firmwareVersion)
        for spec in model?.properties ?? [] where spec.access != .wo {
            initial.properties.append((spec.code, facts[spec.code] ?? PropertyValues.initial(spec, using: &generator)))
        }
        if plan.category != .subdevice {
            let signal = Int.random(in: -75 ... -45, using: &generator)
            initial.wifiSignal = signal
            initial.networks = Self.networks(around: signal, using: &generator)
        }
        initial.generator = generator
        state = Mutex(initial)
    }

    var id: String { plan.id }
    var gatewayId: String? { state.withLock { $0.gatewayId } }

    // MARK: reports

    /// What a device sends when it comes up: online status, information, every property, its signal. An Alink
    /// device: its firmware version, every property and an NTP request (`alinkComingOnline`); a TuyaLink device
    /// much the same (`tuyaLinkComingOnline`).
    func comingOnline(now: Millis) -> [Publication] {
        if plan.dialect == .alink { return alinkComingOnline(now: now) }
        if plan.dialect == .tuyalink { return tuyaLinkComingOnline(now: now) }
        var messages = [status(online: true, now: now), info(now: now)]
        if let report = propertyReport(all: true, now: now) { messages.append(report) }
        if let signal = signalReport(now: now, drift: false) { messages.append(signal) }
        return messages
    }

    /// `{"time":…,"status":"online"}` or the offline form, retained.
    func status(online: Bool, now: Millis) -> Publication {
        Publication(topic: topics.status(id), payload: Self.json([
            ("time", .integer(now)), ("status", .string(online ? "online" : "offline"))]), retain: true)
    }

    /// The will: the retained offline form without a time, which the agent stamps on arrival (the broker sends it
    /// whenever the connection dies, long after any time the device could have written into it).
    var will: MQTTWill {
        MQTTWill(topic: topics.status(id), payload: Self.json([("status", .string("offline"))]), qos: .atLeastOnce,
                 retain: true)
    }

    /// The full information, retained.
    func info(now: Millis) -> Publication {
        Publication(topic: topics.info(id), payload: Self.json([
            ("msgId", .string(nextMessageId("i"))), ("time", .integer(now)), ("data", .object(infoData())),
        ]), retain: true)
    }

    func infoData() -> JSONObject {
        let (signal, gateway, firmware) = state.withLock { ($0.wifiSignal, $0.gatewayId, $0.firmwareVersion) }
        return JSONObject([
            ("devId", .string(id)), ("name", .string(plan.name)), ("productId", .string(plan.productId)),
            ("category", .string(plan.category.rawValue)), ("ip", .string("203.0.113.\(10 + plan.index % 240)")),
            ("lanIp", .string(plan.lanIp)), ("mac", .string(plan.mac)), ("timezone", .string("+01:00")),
            ("netStrength", signal.map { .string("\(min(100, max(0, 2 * ($0 + 100))))%") } ?? .null),
            ("wifiSignal", signal.map { .integer(Int64($0)) } ?? .null), ("iccid", .null), ("rsrp", .null),
            ("channel", plan.channel.map { .integer(Int64($0)) } ?? .null), ("vendorName", .null),
            ("homekitCode", .null),
            ("connectAbility", .string(plan.category == .subdevice ? "gateway" : "phoneAndGateway")),
            ("gatewayId", gateway.map(JSONValue.string) ?? .null), ("spaceId", .integer(plan.spaceId)),
            ("firmwareVersion", .string(firmware)),
            ("abilities", .array(plan.abilities.map { .string($0.rawValue) })),
            ("hardwareInfo", .object(JSONObject([("module", .string(plan.module)), ("flash", .string("2MB"))]))),
        ])
    }

    /// A property report: every reportable property (`all`), or the ones that moved since the last tick.
    func propertyReport(all: Bool, now: Millis, seconds: Double = 0) -> Publication? {
        let changed: [(String, JSONValue)] = state.withLock { state in
            if all { return state.properties }
            var moved: [(String, JSONValue)] = []
            for index in state.properties.indices {
                guard let spec = model?.property(state.properties[index].code) else { continue }
                let next: JSONValue?
                if spec.access == .ro {
                    next = PropertyValues.drift(spec, state.properties[index].value, seconds: seconds,
                                                using: &state.generator)
                } else {
                    // Now and then someone changes a setting at the device itself, unless it was set by request.
                    let changedByHand = state.generator.chance(0.05)
                    next = changedByHand && !state.kept.contains(spec.code)
                        ? PropertyValues.random(spec, using: &state.generator) : nil
                }
                if let next, next != state.properties[index].value {
                    state.properties[index].value = next
                    moved.append((spec.code, next))
                }
            }
            return moved
        }
        guard !changed.isEmpty else { return nil }
        return report(changed, now: now)
    }

    func report(_ values: [(String, JSONValue)], now: Millis) -> Publication {
        if plan.dialect == .alink { return alinkPost(values) }
        if plan.dialect == .tuyalink { return tuyaLinkReport(values, now: now) }
        return Publication(topic: topics.properties(id), payload: Self.json([
            ("msgId", .string(nextMessageId("p"))), ("time", .integer(now)), ("data", .object(JSONObject(values))),
        ]))
    }

    /// Now and then (at `chance` per call) the event of its product (`BuiltinModels.events`): a light's fault, a
    /// gateway's alarm, a sensor's button press, with one parameter from 1 to 3; in its dialect's form.
    func event(chance: Double, now: Millis) -> Publication? {
        guard let name = BuiltinModels.events[plan.productId], let parameter = BuiltinModels.eventParameter[name] else {
            return nil
        }
        let value: Int64? = state.withLock { state in
            state.generator.chance(chance) ? Int64.random(in: 1...3, using: &state.generator) : nil
        }
        guard let value else { return nil }
        let params = JSONObject([(parameter, .integer(value))])
        if plan.dialect == .alink { return alinkEvent(name, params) }
        if plan.dialect == .tuyalink { return tuyaLinkEvent(name, params, now: now) }
        return Publication(topic: topics.event(id), payload: Self.json([
            ("msgId", .string(nextMessageId("e"))), ("time", .integer(now)),
            ("data", .object(JSONObject([("eventCode", .string(name)), ("outputParams", .object(params))]))),
        ]))
    }

    /// A Wi-Fi signal report (QoS 0) whose level wanders a few dBm at a time; nil for devices without Wi-Fi, and for
    /// Alink and TuyaLink devices (neither has such a report).
    func signalReport(now: Millis, drift: Bool = true) -> Publication? {
        guard plan.dialect == .native else { return nil }
        let level: Int? = state.withLock { state in
            guard let current = state.wifiSignal else { return nil }
            if drift {
                state.wifiSignal = min(-35, max(-90, current + Int.random(in: -3...3, using: &state.generator)))
            }
            return state.wifiSignal
        }
        guard let level else { return nil }
        return Publication(topic: topics.signal(id), payload: Self.json([
            ("time", .integer(now)), ("wifiSignal", .integer(Int64(level)))]), qos: .atMostOnce)
    }

    // MARK: requests

    /// What the device does about a request: the answer and what follows it.
    struct Reaction: Sendable {
        var publications: [Publication] = []
        /// A gateway accepted to replace this gateway.
        var startTransfer: String?
        /// The device accepted to install this firmware version.
        var startUpgrade: String?
        /// A TuyaLink gateway's bind was answered: the msgId it answers and the sub-devices' ids it gave.
        var bound: (msgId: String, ids: [String])?
    }

    func handle(_ request: RequestKind, payload: [UInt8], now: Millis) -> Reaction {
        guard let object = try? JSONParser.parse(payload).objectValue,
              let msgId = object["msgId"]?.stringValue else { return Reaction() }  // nothing to answer to
        func answer(_ code: Int, _ message: String? = nil, data: JSONValue? = nil) -> Publication {
            var body = JSONObject([("msgId", .string(msgId)), ("time", .integer(now)), ("code", .integer(Int64(code)))])
            if let message { body["message"] = .string(message) }
            if let data { body["data"] = data }
            return Publication(topic: topics.response(request, device: id), payload: JSONValue.object(body).serializedBytes())
        }
        switch request {
        case .setProperties:
            guard let values = object["data"]?.objectValue else {
                return Reaction(publications: [answer(1003, "'data' must be an object of property values")])
            }
            if let refusal = SetRefusal.check(values, model: model) {
                return Reaction(publications: [answer(refusal.code, refusal.message)])
            }
            state.withLock { state in
                for (code, value) in values {
                    state.kept.insert(code)
                    if let index = state.properties.firstIndex(where: { $0.code == code }) {
                        state.properties[index].value = value
                    } else if model?.property(code)?.access != .wo {
                        state.properties.append((code, value))
                    }
                }
            }
            // Like a real device: the answer, then a report of the values it now has.
            return Reaction(publications: [answer(0), report(Array(values), now: now)])
        case .getInfo:
            return Reaction(publications: [answer(0, data: .object(infoData()))])
        case .wifiScan:
            guard plan.abilities.contains(.wifiList) else { return Reaction() }
            return Reaction(publications: [answer(0, data: scan())])
        case .gatewayTransferStart:
            guard plan.abilities.contains(.gatewayTransfer) else { return Reaction() }
            guard let target = object["data"]?["targetDeviceId"]?.stringValue, DeviceID.isValid(target), target != id else {
                return Reaction(publications: [answer(1003, "'data.targetDeviceId' must name another gateway")])
            }
            let busy = state.withLock { state in
                defer { state.transferRunning = true }
                return state.transferRunning
            }
            if busy { return Reaction(publications: [answer(1006, "a transfer is already running")]) }
            return Reaction(publications: [answer(0)], startTransfer: target)
        case .otaStart:
            let (code, message, version) = answerUpgrade(object["data"]?.objectValue)
            return Reaction(publications: [answer(code, message)], startUpgrade: version)
        case .action:
            // One action every simulated device has: identify (it blinks), which says how often it blinked.
            guard object["data"]?["actionCode"]?.stringValue == "identify" else {
                return Reaction(publications: [answer(1004, "unknown action")])
            }
            let times = object["data"]?["inputParams"]?["times"]?.int64Value ?? 3
            return Reaction(publications: [answer(0, data: .object(["outputParams": .object(["blinked": .integer(times)])]))])
        }
    }

    /// What firmware that answered a set before looking at it (Linkkit's, Tuya's) does next: applies the values its
    /// thing model takes, one by one, and keeps them (a setting set by request is not changed at random afterwards).
    /// Returns the applied values, to report.
    func applyWhatTheModelTakes(_ values: JSONObject) -> [(String, JSONValue)] {
        var applied: [(String, JSONValue)] = []
        for (code, value) in values where SetRefusal.check(JSONObject([(code, value)]), model: model) == nil {
            applied.append((code, value))
        }
        state.withLock { state in
            for (code, value) in applied {
                state.kept.insert(code)
                if let index = state.properties.firstIndex(where: { $0.code == code }) {
                    state.properties[index].value = value
                } else {
                    state.properties.append((code, value))
                }
            }
        }
        return applied
    }

    /// A gateway-transfer progress report about replacing `target`.
    func transferStatus(target: String, targetName: String?, _ status: TransferStatus, failedCode: String = "",
                        now: Millis) -> Publication {
        var data = JSONObject([("targetDeviceId", .string(target))])
        if let targetName { data["targetDeviceName"] = .string(targetName) }
        data["sourceDeviceId"] = .string(id)
        data["status"] = .integer(Int64(status.rawValue))
        data["failedCode"] = .string(failedCode)
        return Publication(topic: topics.transferStatus(id), payload: Self.json([
            ("msgId", .string(nextMessageId("t"))), ("time", .integer(now)), ("data", .object(data))]))
    }

    /// Whether the next transfer fails, and after which stage (1 to 3), drawn from the device's own stream.
    func drawTransferFailure(rate: Double) -> Int? {
        state.withLock { state in
            state.generator.chance(rate) ? Int.random(in: 1...3, using: &state.generator) : nil
        }
    }

    /// Sets a property the device reports (a fact that changed) and returns the report; nil when it has no such
    /// property or the value is the same.
    func report(_ code: String, _ value: JSONValue, now: Millis) -> Publication? {
        let changed = state.withLock { state -> Bool in
            guard let index = state.properties.firstIndex(where: { $0.code == code }),
                  state.properties[index].value != value else { return false }
            state.properties[index].value = value
            return true
        }
        return changed ? report([(code, value)], now: now) : nil
    }

    func value(_ code: String) -> JSONValue? {
        state.withLock { state in state.properties.first { $0.code == code }?.value }
    }

    var firmwareVersion: String { state.withLock { $0.firmwareVersion } }

    /// Marks an upgrade as running; false when one already runs.
    func beginUpgrade() -> Bool {
        state.withLock { state in
            defer { state.upgradeRunning = true }
            return !state.upgradeRunning
        }
    }

    func endUpgrade() {
        state.withLock { $0.upgradeRunning = false }
    }

    func installed(_ version: String) {
        state.withLock { $0.firmwareVersion = version }
    }

    /// Whether the next upgrade fails, drawn from the device's own stream.
    func drawUpgradeFailure(rate: Double) -> Bool {
        state.withLock { $0.generator.chance(rate) }
    }

    /// The gateway's transfer ended; it takes new ones again.
    func transferEnded() {
        state.withLock { $0.transferRunning = false }
    }

    /// A sub-device now reached through another gateway: the new information to publish.
    func moved(to gateway: String, now: Millis) -> Publication {
        state.withLock { $0.gatewayId = gateway }
        return info(now: now)
    }

    /// The networks in view, each a little stronger or weaker than last time. Includes a second access point of
    /// one network and a hidden network, as real scans do.
    private func scan() -> JSONValue {
        state.withLock { state in
            .array(state.networks.map { network in
                let rssi = min(-30, max(-95, network.rssi + Int.random(in: -2...2, using: &state.generator)))
                return .object(JSONObject([("ssid", .string(network.ssid)), ("rssi", .integer(Int64(rssi))),
                                           ("sec", .integer(Int64(network.sec)))]))
            })
        }
    }

    static let ssids = ["OS_BASE_2G", "OS_BASE_5G", "Neighbour", "CafeGuest", "Printer-Direct", "IoT", "FRITZ!Box 7530",
                        "TP-Link_4F2A", "eduroam", "Vodafone-Home"]

    private static func networks(around signal: Int, using generator: inout SeededGenerator)
        -> [(ssid: String, rssi: Int, sec: Int)] {
        var pool = ssids.shuffled(using: &generator)
        let own = pool.removeFirst()
        var list = [(own, signal, 5)]
        for ssid in pool.prefix(Int.random(in: 3...6, using: &generator)) {
            list.append((ssid, Int.random(in: -88 ... -50, using: &generator), Int.random(in: 0...5, using: &generator)))
        }
        list.append((own, signal - Int.random(in: 8...20, using: &generator), 5))  // a second access point
        list.append(("", Int.random(in: -80 ... -60, using: &generator), 4))       // a hidden network
        return list
    }

    private func nextMessageId(_ prefix: String) -> String {
        let n = state.withLock { state in
            state.messageCounter += 1
            return state.messageCounter
        }
        return "\(prefix)\(n)"
    }

    static func json(_ pairs: [(String, JSONValue)]) -> [UInt8] {
        JSONValue.object(JSONObject(pairs)).serializedBytes()
    }
}
