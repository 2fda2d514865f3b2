import JSON
import MQTT
import ThingAgent

/// What the platform (the agent) sends an Alink device, by topic (`AlinkTopics`, published by the platform).
enum AlinkDownlink: Equatable, Sendable {
    case propertySet
    /// A service call, `/sys/{pk}/{dn}/thing/service/{identifier}`.
    case service(String)
    case upgrade
    /// An answer to something the device sent: a post's, the NTP response, a topology or session reply.
    case reply

    /// The device (`<pk>.<dn>`) a topic is for, and what it carries; nil for a topic no Alink device reads (its
    /// own service replies, heard back on its `service/+` subscription, among them).
    static func parse(_ topic: String) -> (device: String, downlink: AlinkDownlink)? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count >= 6, levels[0].isEmpty else { return nil }
        switch (levels[1], levels.count) {
        case ("sys", 7) where levels[4] == "thing" && levels[5] == "service":
            let id = AlinkDialect.deviceID(productKey: levels[2], deviceName: levels[3])
            return levels[6].hasSuffix("_reply") ? nil : (id, .service(String(levels[6])))
        case ("sys", 8) where levels[4] == "thing" && levels[5] == "service" && levels[6] == "property":
            let id = AlinkDialect.deviceID(productKey: levels[2], deviceName: levels[3])
            return levels[7] == "set" ? (id, .propertySet) : nil
        case ("sys", _) where levels[4] == "thing" && topic.hasSuffix("_reply"):
            return (AlinkDialect.deviceID(productKey: levels[2], deviceName: levels[3]), .reply)
        case ("ota", 6) where levels[2] == "device" && levels[3] == "upgrade":
            return (AlinkDialect.deviceID(productKey: levels[4], deviceName: levels[5]), .upgrade)
        case ("ext", 6) where levels[2] == "ntp" && levels[5] == "response":
            return (AlinkDialect.deviceID(productKey: levels[3], deviceName: levels[4]), .reply)
        case ("ext", 7) where levels[2] == "session" && levels[6].hasSuffix("_reply"):
            return (AlinkDialect.deviceID(productKey: levels[3], deviceName: levels[4]), .reply)
        default:
            return nil
        }
    }
}

/// A simulated device that speaks Alink as Alibaba's device SDK, Linkkit, does (docs/protocol.md, "Alink";
/// Tests/Interop/linkkit drives the SDK itself): no will and no status, request ids that start at "1" at every
/// (re)start, booleans and enums as numbers, property sets answered with code 200 before the values are applied and
/// posted, services answered on `{identifier}_reply`, its firmware version informed when it comes up and after an
/// upgrade, and a gateway that adds its sub-devices to its topology and logs them in, then speaks for them on their
/// own topics over its connection.
extension VirtualDevice {
    /// Its product key and name; an Alink device's id always splits.
    var alinkNames: (productKey: String, deviceName: String) {
        plan.alink ?? (plan.productId, plan.id)
    }

    private var sys: String { "/sys/\(alinkNames.productKey)/\(alinkNames.deviceName)/thing/" }

    /// The next request id, as Linkkit counts them: a decimal string from "1".
    func nextAlinkID() -> String {
        String(state.withLock { state in
            state.alinkCounter += 1
            return state.alinkCounter
        })
    }

    /// The device (re)started: its ids start at "1" again.
    func restartAlinkIDs() {
        state.withLock { $0.alinkCounter = 0 }
    }

    /// Coming up: the firmware version it runs, every property, and (a device with a connection of its own) an NTP
    /// request for the time.
    func alinkComingOnline(now: Millis) -> [Publication] {
        var messages = [alinkInform(firmwareVersion)]
        if let post = propertyReport(all: true, now: now) { messages.append(post) }
        if plan.category != .subdevice { messages.append(alinkNTPRequest(now: now)) }
        return messages
    }

    /// `thing.event.property.post`, QoS 1.
    func alinkPost(_ values: [(String, JSONValue)]) -> Publication {
        Publication(topic: sys + "event/property/post", payload: Self.json([
            ("id", .string(nextAlinkID())), ("version", .string("1.0")), ("params", .object(JSONObject(values))),
            ("method", .string("thing.event.property.post")),
        ]))
    }

    /// The firmware version, QoS 0, as Linkkit's `ota_report_version` sends it (its id always the number 1).
    func alinkInform(_ version: String) -> Publication {
        Publication(topic: "/ota/device/inform/\(alinkNames.productKey)/\(alinkNames.deviceName)", payload: Self.json([
            ("id", .integer(1)), ("params", .object(JSONObject([("version", .string(version))]))),
        ]), qos: .atMostOnce)
    }

    /// An NTP request, QoS 0: the device's time as a string of milliseconds.
    func alinkNTPRequest(now: Millis) -> Publication {
        Publication(topic: "/ext/ntp/\(alinkNames.productKey)/\(alinkNames.deviceName)/request",
                    payload: Self.json([("deviceSendTime", .string(String(now)))]), qos: .atMostOnce)
    }

    /// An event as Linkkit's `thing_trigger_event` posts it: QoS 0, `params.value` its parameters.
    func alinkEvent(_ name: String, _ params: JSONObject) -> Publication {
        Publication(topic: sys + "event/\(name)/post", payload: Self.json([
            ("id", .string(nextAlinkID())), ("version", .string("1.0")),
            ("params", .object(JSONObject([("value", .object(params))]))),
            ("method", .string("thing.event.\(name).post")),
        ]), qos: .atMostOnce)
    }

    /// An upgrade's progress, QoS 0: `step` 1 to 100, or -1 to -4 for a failure.
    func alinkProgress(step: Int, desc: String) -> Publication {
        Publication(topic: "/ota/device/progress/\(alinkNames.productKey)/\(alinkNames.deviceName)", payload: Self.json([
            ("id", .string(nextAlinkID())),
            ("params", .object(JSONObject([("step", .string(String(step))), ("desc", .string(desc))]))),
        ]), qos: .atMostOnce)
    }

    // MARK: a gateway's sub-devices

    /// What names a sub-device in a topology or session request, as Linkkit fills it: its client id, a time, and a
    /// signature of those with the sub-device's secret. The simulator holds no secret (nor does the agent check
    /// one): the signature is random hex of the right length.
    private func credential(of sub: VirtualDevice, clientID: String, now: Millis) -> [(String, JSONValue)] {
        let sign = state.withLock { state in
            (0..<32).map { _ in String(UInt8.random(in: 0...255, using: &state.generator), radix: 16).leftPadded(to: 2) }
                .joined()
        }
        return [("productKey", .string(sub.alinkNames.productKey)), ("deviceName", .string(sub.alinkNames.deviceName)),
                ("clientId", .string(clientID)), ("timestamp", .string(String(now))), ("sign", .string(sign))]
    }

    /// `thing.topo.add` of `subs`, QoS 1.
    func alinkTopoAdd(_ subs: [VirtualDevice], now: Millis) -> Publication {
        let list: [JSONValue] = subs.map { sub in
            .object(JSONObject(credential(of: sub, clientID: sub.id, now: now) + [("signmethod", .string("hmacSha256"))]))
        }
        return Publication(topic: sys + "topo/add", payload: Self.json([
            ("id", .string(nextAlinkID())), ("version", .string("1.0")), ("params", .array(list)),
            ("method", .string("thing.topo.add")),
        ]))
    }

    /// Logs `subs` in, QoS 0: `combine/login` for one, `combine/batch_login` for several (what Linkkit's
    /// `gateway_login_subdev` sends).
    func alinkLogin(_ subs: [VirtualDevice], now: Millis) -> Publication {
        let session = "/ext/session/\(alinkNames.productKey)/\(alinkNames.deviceName)/combine/"
        func entry(_ sub: VirtualDevice) -> [(String, JSONValue)] {
            credential(of: sub, clientID: sub.id + "|_ss=1|", now: now) + [("cleanSession", .string("false"))]
        }
        if subs.count == 1 {
            return Publication(topic: session + "login", payload: Self.json([
                ("id", .string(nextAlinkID())), ("version", .string("1.0")),
                ("params", .object(JSONObject(entry(subs[0]) + [("signMethod", .string("hmacSha256"))]))),
            ]), qos: .atMostOnce)
        }
        return Publication(topic: session + "batch_login", payload: Self.json([
            ("id", .string(nextAlinkID())), ("version", .string("1.0")),
            ("params", .object(JSONObject([("signMethod", .string("hmacSha256")),
                                           ("deviceList", .array(subs.map { .object(JSONObject(entry($0))) }))]))),
        ]), qos: .atMostOnce)
    }

    /// Logs `subs` out, QoS 0: `combine/logout` for one, `combine/batch_logout` for several.
    func alinkLogout(_ subs: [VirtualDevice]) -> Publication {
        let session = "/ext/session/\(alinkNames.productKey)/\(alinkNames.deviceName)/combine/"
        func names(_ sub: VirtualDevice) -> JSONObject {
            JSONObject([("productKey", .string(sub.alinkNames.productKey)),
                        ("deviceName", .string(sub.alinkNames.deviceName))])
        }
        let params: JSONValue = subs.count == 1 ? .object(names(subs[0])) : .array(subs.map { .object(names($0)) })
        return Publication(topic: session + (subs.count == 1 ? "logout" : "batch_logout"), payload: Self.json([
            ("id", .string(nextAlinkID())), ("version", .string("1.0")), ("params", params),
        ]), qos: .atMostOnce)
    }

    // MARK: what the platform asks

    /// What the device does about what the platform sent it.
    func handleAlink(_ downlink: AlinkDownlink, payload: [UInt8], now: Millis) -> Reaction {
        guard let object = try? JSONParser.parse(payload).objectValue else { return Reaction() }
        switch downlink {
        case .propertySet:
            guard let id = object["id"] else { return Reaction() }
            // Linkkit answers 200 before the firmware sees the values; the firmware then applies the ones it can
            // (its thing model's rules) and posts them.
            let reply = Publication(topic: sys + "service/property/set_reply", payload: Self.json([
                ("id", id), ("code", .integer(200)), ("data", .object([:])),
            ]))
            let applied = applyWhatTheModelTakes(object["params"]?.objectValue ?? [:])
            guard !applied.isEmpty else { return Reaction(publications: [reply]) }
            return Reaction(publications: [reply, alinkPost(applied)])
        case .service(let identifier):
            // Linkkit hands the device only the services of its TSL; any other call goes unanswered.
            guard identifier == "identify", let id = object["id"] else { return Reaction() }
            let times = object["params"]?["times"]?.int64Value ?? 3
            return Reaction(publications: [Publication(topic: sys + "service/identify_reply", payload: Self.json([
                ("id", id), ("code", .integer(200)), ("data", .object(["blinked": .integer(times)])),
            ]), qos: .atMostOnce)])
        case .upgrade:
            // Linkkit passes a push on only with every one of size, version, url, sign and signMethod.
            guard let data = object["data"]?.objectValue, let version = data["version"]?.stringValue,
                  data["url"]?.stringValue?.isEmpty == false, data["sign"]?.stringValue?.isEmpty == false,
                  data["signMethod"]?.stringValue != nil, (data["size"]?.int64Value ?? 0) > 0 else { return Reaction() }
            guard FirmwareVersion(version) != nil, FirmwareVersion.isNewer(version, than: firmwareVersion) else {
                return Reaction(publications: [alinkProgress(
                    step: -1, desc: "\(version) is not newer than the installed \(firmwareVersion)")])
            }
            // One upgrade at a time: a push while one runs is ignored, as the firmware would.
            guard beginUpgrade() else { return Reaction() }
            return Reaction(startUpgrade: version)
        case .reply:
            return Reaction()
        }
    }
}

extension Simulator {
    /// An Alink device installs `version`, reporting its progress as Linkkit's applications do: steps 1, 50 and
    /// 100 (downloaded) a step apart, then it restarts (ids from "1" again; a sub-device is logged out and in again
    /// by its gateway) and informs the new version. At the failure rate it fails instead: -2 after the download's
    /// start (download), -3 instead of 100 (the image's digest), -4 after 100 (flash), comes back with the old
    /// version (rollback), or stops reporting after step 1 (stall).
    func alinkUpgrade(_ device: VirtualDevice, to version: String) async {
        await vendorUpgrade(device, to: version, wire: VendorUpgradeWire(
            steps: [1, 50, 100],
            progress: { device.alinkProgress(step: $0, desc: $0 == 100 ? "downloaded" : "downloading") },
            failed: { failure in
                switch failure {
                case .download: device.alinkProgress(step: -2, desc: "download failed")
                case .verify: device.alinkProgress(step: -3, desc: "the image's digest does not match")
                default: device.alinkProgress(step: -4, desc: "flash failed")
                }
            },
            logout: { $0.alinkLogout([device]) },
            login: { $0.alinkLogin([device], now: Timestamp.current) },
            restart: { device.restartAlinkIDs() },
            report: { device.alinkInform(device.firmwareVersion) }))
    }
}
