import JSON

/// Alink, the MQTT protocol of Alibaba Cloud's IoT Platform, as its device SDK (Linkkit) speaks it
/// (docs/protocol.md, "Alink"). A device is `<productKey>.<deviceName>` in the agent; its topics are
/// `/sys/{pk}/{dn}/thing/...`, `/ota/device/.../{pk}/{dn}` and `/ext/ntp/{pk}/{dn}/...`.
///
/// Requests carry `{"id","version","params","method"}`; `id` is a decimal counter that restarts at "1" whenever
/// the device restarts, so nothing is ever dropped as a repeat by it. Payloads carry no time (the arrival is used),
/// except a property's own `{"value","time"}`. The platform owes a reply to every post (`_reply`, with `id`,
/// `code` 200, `data` and `message`: the SDK drops one that lacks any of them) and to an NTP request.
package struct AlinkDialect: Dialect {
    package init() {}

    package var name: String { "alink" }
    package var trafficMeansOnline: Bool { true }

    /// What each topic carries (`DialectRoute.detail`).
    enum Topic: Int {
        case propertyPost, eventPost, setReply, tagsUpdate, tagsDelete, otaInform, ntpRequest, otaProgress
        /// A service's reply (an action's answer), and a service call heard back (the agent's own, or a CLI's).
        case serviceReply, serviceCall
        // A gateway's sub-devices: topology, and their sessions on the gateway's connection.
        case topoAdd, topoDelete, login, logout, batchLogin, batchLogout
    }

    package var subscriptions: [(filter: String, qos: Int)] {
        [
            // Property posts and every event's post (`property` is one level like an event's identifier).
            ("/sys/+/+/thing/event/+/post", 1),
            ("/sys/+/+/thing/service/property/set_reply", 1),
            // Services' calls and replies (`{identifier}` and `{identifier}_reply` are one level).
            ("/sys/+/+/thing/service/+", 1),
            ("/sys/+/+/thing/deviceinfo/update", 1),
            ("/sys/+/+/thing/deviceinfo/delete", 1),
            ("/ota/device/inform/+/+", 1),
            ("/ota/device/progress/+/+", 1),
            ("/ext/ntp/+/+/request", 1),
            ("/sys/+/+/thing/topo/add", 1),
            ("/sys/+/+/thing/topo/delete", 1),
            ("/ext/session/+/+/combine/login", 1),
            ("/ext/session/+/+/combine/logout", 1),
            ("/ext/session/+/+/combine/batch_login", 1),
            ("/ext/session/+/+/combine/batch_logout", 1),
        ]
    }

    // MARK: device ids

    /// `<pk>.<dn>`: a product key has no dot, so the first dot splits them back.
    package static func deviceID(productKey: some StringProtocol, deviceName: some StringProtocol) -> String {
        "\(productKey).\(deviceName)"
    }

    package static func split(_ device: String) -> (productKey: Substring, deviceName: Substring)? {
        guard let dot = device.firstIndex(of: "."), dot != device.startIndex,
              device.index(after: dot) != device.endIndex else { return nil }
        return (device[..<dot], device[device.index(after: dot)...])
    }

    package func addresses(_ device: String) -> Bool { Self.split(device) != nil }

    /// Linkkit's client id is `<pk>&<dn>|securemode=...|` and its user name `<dn>&<pk>` (which a broker with
    /// `use_username_as_clientid` also uses as the client id).
    package func device(forClient client: String, user: String?) -> String? {
        if let user, let amp = user.firstIndex(of: "&") {
            return Self.deviceID(productKey: user[user.index(after: amp)...], deviceName: user[..<amp])
        }
        if let bar = client.firstIndex(of: "|") {
            let head = client[..<bar]
            guard let amp = head.firstIndex(of: "&") else { return nil }
            return Self.deviceID(productKey: head[..<amp], deviceName: head[head.index(after: amp)...])
        }
        guard let amp = client.firstIndex(of: "&") else { return nil }
        return Self.deviceID(productKey: client[client.index(after: amp)...], deviceName: client[..<amp])
    }

    /// The product key is the device's product: its thing model is `<productKey>.json`.
    package func identity(of device: String) -> JSONObject? {
        Self.split(device).map { JSONObject([("productId", .string(String($0.productKey)))]) }
    }

    // MARK: inbound

    package func route(_ topic: String) throws(Topics.ParseError) -> DialectRoute? {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        // A leading slash: the first level is empty.
        guard levels.count >= 5, levels[0].isEmpty else { return nil }
        let found: (pk: Substring, dn: Substring, topic: Topic)?
        switch levels[1] {
        case "sys" where levels.count >= 7 && levels[4] == "thing":
            found = Self.sysTopic(levels).map { (levels[2], levels[3], $0) }
        case "ota" where levels.count == 6 && levels[2] == "device" && levels[3] == "inform":
            found = (levels[4], levels[5], .otaInform)
        case "ota" where levels.count == 6 && levels[2] == "device" && levels[3] == "progress":
            found = (levels[4], levels[5], .otaProgress)
        case "ext" where levels.count == 6 && levels[2] == "ntp" && levels[5] == "request":
            found = (levels[3], levels[4], .ntpRequest)
        case "ext" where levels.count == 7 && levels[2] == "session" && levels[5] == "combine":
            let session: [Substring: Topic] = ["login": .login, "logout": .logout, "batch_login": .batchLogin,
                                               "batch_logout": .batchLogout]
            found = session[levels[6]].map { (levels[3], levels[4], $0) }
        default:
            found = nil
        }
        guard let found else { return nil }
        let device = Self.deviceID(productKey: found.pk, deviceName: found.dn)
        guard !found.pk.contains("."), DeviceID.isValid(device) else { throw .invalidDeviceID }
        return DialectRoute(device: device, kind: Self.kind(found.topic), detail: found.topic.rawValue)
    }

    /// `/sys/{pk}/{dn}/thing/...`, by the levels after `thing` (compared level by level: this runs for every post).
    private static func sysTopic(_ levels: [Substring]) -> Topic? {
        switch (levels.count, levels[5]) {
        case (8, "event") where levels[7] == "post": levels[6] == "property" ? .propertyPost : .eventPost
        case (8, "service") where levels[6] == "property" && levels[7] == "set_reply": .setReply
        case (7, "service"): levels[6].hasSuffix("_reply") ? .serviceReply : .serviceCall
        case (7, "deviceinfo"): levels[6] == "update" ? .tagsUpdate : levels[6] == "delete" ? .tagsDelete : nil
        case (7, "topo"): levels[6] == "add" ? .topoAdd : levels[6] == "delete" ? .topoDelete : nil
        default: nil
        }
    }

    private static func kind(_ topic: Topic) -> InboundKind {
        switch topic {
        case .propertyPost, .eventPost: .properties
        case .setReply: .response(.setProperties)
        case .tagsUpdate, .tagsDelete: .status
        case .otaInform: .info
        case .otaProgress: .otaProgress
        case .serviceReply: .response(.action)
        case .serviceCall: .status
        case .ntpRequest: .status
        case .topoAdd, .topoDelete, .login, .logout, .batchLogin, .batchLogout: .info
        }
    }

    package func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage {
        guard let topic = Topic(rawValue: route.detail) else { throw PayloadError("not an Alink topic") }
        let object = try PayloadDecoder.object(payload)
        let message = try Self.message(topic, object, device: route.device, arrival: arrival)
        return DialectMessage(message, replies: Self.replies(topic, object, device: route.device, arrival: arrival))
    }

    private static func message(_ topic: Topic, _ object: JSONObject, device: String, arrival: Millis)
        throws(PayloadError) -> InboundMessage {
        switch topic {
        case .propertyPost:
            guard let params = object["params"]?.objectValue else { throw PayloadError("post has no 'params' object") }
            return .properties(try PayloadDecoder.properties(params, time: arrival))
        case .eventPost:
            // Events reach the agent's own messages later; the post is answered, and counted as unchanged.
            return .answeredOnly
        case .setReply:
            return .response(try Self.response(object, arrival: arrival))
        case .tagsUpdate, .tagsDelete:
            // Answered, so that the SDK is content; the device's information has no place for tags yet.
            guard object["params"]?.arrayValue != nil else { throw PayloadError("a tags message has no 'params' list") }
            return .answeredOnly
        case .otaInform:
            guard let version = object["params"]?["version"]?.stringValue else {
                throw PayloadError("inform needs 'params.version'")
            }
            return .info(JSONObject([("firmwareVersion", .string(version))]), time: arrival)
        case .ntpRequest:
            return .answeredOnly
        case .otaProgress:
            return .otaProgress(try Self.progress(object, arrival: arrival))
        case .serviceReply:
            // The service's output is the action's output parameters.
            var response = try Self.response(object, arrival: arrival)
            response.data = .object(["outputParams": object["data"] ?? .object([:])])
            return .response(response)
        case .serviceCall:
            return .answeredOnly
        case .topoAdd, .topoDelete, .login, .logout, .batchLogin, .batchLogout:
            return .batch(try Self.subDevices(topic, of: device, object, arrival: arrival))
        }
    }

    /// What a gateway's topology or session message says of its sub-devices: added (linked to the gateway),
    /// deleted (unlinked), logged in (online, and linked) or out (offline). The signs in them are not checked:
    /// the agent holds no sub-device's secret, and the broker already let the gateway in.
    private static func subDevices(_ topic: Topic, of gateway: String, _ object: JSONObject, arrival: Millis)
        throws(PayloadError) -> [DeviceMessage] {
        let list: [JSONValue]
        switch topic {
        case .batchLogin: list = object["params"]?["deviceList"]?.arrayValue ?? []
        case .login, .logout: list = object["params"].map { [$0] } ?? []
        default: list = object["params"]?.arrayValue ?? []
        }
        guard !list.isEmpty else { throw PayloadError("names no sub-device ('params')") }
        var messages: [DeviceMessage] = []
        for entry in list {
            guard let pk = entry["productKey"]?.stringValue, let dn = entry["deviceName"]?.stringValue else {
                throw PayloadError("a sub-device needs 'productKey' and 'deviceName' strings")
            }
            let device = deviceID(productKey: pk, deviceName: dn)
            // Linked to the gateway; its product key is its product, as for a device first heard from itself.
            let linked = JSONObject([("gatewayId", .string(gateway)), ("productId", .string(pk))])
            switch topic {
            case .topoAdd:
                messages.append(DeviceMessage(device, .info(linked, time: arrival)))
            case .topoDelete:
                messages.append(DeviceMessage(device, .info(JSONObject([("gatewayId", .null)]), time: arrival)))
            case .login, .batchLogin:
                messages.append(DeviceMessage(device, .info(linked, time: arrival)))
                messages.append(DeviceMessage(device, .status(online: true, time: arrival)))
            default:
                messages.append(DeviceMessage(device, .status(online: false, time: arrival)))
            }
        }
        return messages
    }

    /// The answers the platform owes the device for a message it decoded.
    private static func replies(_ topic: Topic, _ object: JSONObject, device: String, arrival: Millis)
        -> [OutboundMessage] {
        guard let (pk, dn) = split(device) else { return [] }
        let base = "/sys/\(pk)/\(dn)/thing/"
        switch topic {
        case .propertyPost:
            return [Self.reply(base + "event/property/post_reply", to: object, method: "thing.event.property.post")]
        case .eventPost:
            let event = object["method"]?.stringValue ?? "thing.event.post"
            let identifier = event.split(separator: ".").dropFirst(2).first.map(String.init) ?? "post"
            return [Self.reply(base + "event/\(identifier)/post_reply", to: object, method: event)]
        case .tagsUpdate:
            return [Self.reply(base + "deviceinfo/update_reply", to: object, method: "thing.deviceinfo.update")]
        case .tagsDelete:
            return [Self.reply(base + "deviceinfo/delete_reply", to: object, method: "thing.deviceinfo.delete")]
        case .ntpRequest:
            guard let sent = object["deviceSendTime"] else { return [] }
            // The times as strings of milliseconds, as Alibaba's documents give them.
            let answer = JSONObject([("deviceSendTime", sent), ("serverRecvTime", .string(String(arrival))),
                                     ("serverSendTime", .string(String(arrival)))])
            return [OutboundMessage(topic: "/ext/ntp/\(pk)/\(dn)/response",
                                    payload: JSONValue.object(answer).serializedBytes(), qos: 0)]
        case .topoAdd, .topoDelete:
            let name = topic == .topoAdd ? "add" : "delete"
            return [Self.reply(base + "topo/\(name)_reply", to: object, method: "thing.topo.\(name)",
                               data: Self.named(object["params"]?.arrayValue))]
        case .login, .logout, .batchLogin, .batchLogout:
            let name = ["login", "logout", "batch_login", "batch_logout"][topic.rawValue - Topic.login.rawValue]
            let list = topic == .batchLogin ? object["params"]?["deviceList"]?.arrayValue
                : topic == .batchLogout ? object["params"]?.arrayValue : object["params"].map { [$0] }
            let named = Self.named(list)
            let data: JSONValue = topic == .login || topic == .logout ? named.arrayValue?.first ?? .object([:]) : named
            return [Self.reply("/ext/session/\(pk)/\(dn)/combine/\(name)_reply", to: object,
                               method: "combine.\(name)", data: data)]
        case .setReply, .otaInform, .otaProgress, .serviceReply, .serviceCall:
            return []
        }
    }

    /// `{"id","code":200,"data":{},"message":"success","version":"1.0","method"}`: every field the SDK checks.
    private static func reply(_ topic: String, to request: JSONObject, method: String,
                              data: JSONValue = .object(JSONObject())) -> OutboundMessage {
        let answer = JSONObject([
            ("id", request["id"] ?? .string("0")), ("code", .integer(200)), ("data", data),
            ("message", .string("success")), ("version", .string("1.0")), ("method", .string(method)),
        ])
        return OutboundMessage(topic: topic, payload: JSONValue.object(answer).serializedBytes(), qos: 0)
    }

    /// `[{"productKey","deviceName"}]` of the sub-devices a request named, as its reply's `data`.
    private static func named(_ list: [JSONValue]?) -> JSONValue {
        .array((list ?? []).map { entry in
            .object(JSONObject([("productKey", entry["productKey"] ?? .null), ("deviceName", entry["deviceName"] ?? .null)]))
        })
    }

    // MARK: outbound

    package func request(_ kind: RequestKind, device: String, msgId: String, data: JSONValue?, time: Millis)
        -> OutboundMessage? {
        guard let (pk, dn) = Self.split(device), let id = Self.wireID(msgId) else { return nil }
        switch kind {
        case .setProperties:
            let payload = JSONObject([
                ("id", .string(id)), ("version", .string("1.0")), ("params", data ?? .object(JSONObject())),
                ("method", .string("thing.service.property.set")),
            ])
            return OutboundMessage(topic: "/sys/\(pk)/\(dn)/thing/service/property/set",
                                   payload: JSONValue.object(payload).serializedBytes(), qos: 1)
        case .otaStart:
            // The push Linkkit takes: every one of url, version, size, sign and signMethod, or the device hears
            // nothing; `SHA256` with the lowercase hex digest (`MD5` in capitals crashes its download). It is not
            // answered: progress and the new version follow on their own topics.
            guard let image = data, let url = image["url"]?.stringValue, let version = image["version"]?.stringValue,
                  let sha256 = image["sha256"]?.stringValue, let size = image["size"]?.int64Value, size > 0 else {
                return nil
            }
            let payload = JSONObject([
                ("code", .string("1000")), ("id", .integer(Int64(id) ?? 0)), ("message", .string("success")),
                ("data", .object(JSONObject([
                    ("size", .integer(size)), ("version", .string(version)), ("url", .string(url)),
                    ("sign", .string(sha256.lowercased())), ("signMethod", .string("SHA256")),
                ]))),
            ])
            return OutboundMessage(topic: "/ota/device/upgrade/\(pk)/\(dn)",
                                   payload: JSONValue.object(payload).serializedBytes(), qos: 1, answered: false)
        case .action:
            // A service call: `/sys/{pk}/{dn}/thing/service/{name}` with the input parameters, answered on `_reply`.
            guard let name = data?["actionCode"]?.stringValue, Self.isIdentifier(name) else { return nil }
            let payload = JSONObject([
                ("id", .string(id)), ("version", .string("1.0")), ("params", data?["inputParams"] ?? .object([:])),
                ("method", .string("thing.service.\(name)")),
            ])
            return OutboundMessage(topic: "/sys/\(pk)/\(dn)/thing/service/\(name)",
                                   payload: JSONValue.object(payload).serializedBytes(), qos: 1)
        case .getInfo, .wifiScan, .gatewayTransferStart:
            return nil
        }
    }

    /// `{"id","params":{"step","desc"}}`: steps 1 to 99 are the download, 100 its end (the device then flashes and
    /// reports its new version), -1 a failure, -2 the download, -3 the check of its digest, -4 the flash. The report
    /// names no version: it is the running upgrade's.
    private static func progress(_ object: JSONObject, arrival: Millis) throws(PayloadError) -> OTAProgressReport {
        let step = object["params"]?["step"]
        guard let number = step?.stringValue.flatMap({ Int($0) }) ?? step?.int64Value.map({ Int($0) }),
              (-4...100).contains(number) else {
            throw PayloadError("progress needs 'params.step' from -4 to 100")
        }
        let failures = [-1: "device", -2: "download", -3: "verify", -4: "flash"]
        if let failed = failures[number] {
            return OTAProgressReport(version: "", stage: .failed, progress: 0, failedCode: failed, time: arrival)
        }
        guard number >= 0 else { throw PayloadError("progress needs 'params.step' from -4 to 100") }
        return OTAProgressReport(version: "", stage: number >= 100 ? .flashing : .downloading,
                                 progress: min(number, 100), failedCode: "", time: arrival)
    }

    /// An action name that is also a service of its own topic: never `property` or a `_reply`.
    static func isIdentifier(_ name: String) -> Bool {
        RequestKind.isActionName(name) && name != "property" && !name.hasSuffix("_reply")
    }

    /// The agent's `msgId` (`t` and a base-36 counter) as Alink's decimal `id`, and back.
    package static func wireID(_ msgId: String) -> String? {
        guard msgId.first == "t", let number = UInt64(msgId.dropFirst(), radix: 36) else { return nil }
        return String(number)
    }

    package static func msgId(_ wireID: String) -> String? {
        UInt64(wireID).map { "t" + String($0, radix: 36) }
    }

    // MARK: payload helpers

    /// A reply to one of the agent's requests: code 200 is success (0 in the agent's terms).
    private static func response(_ object: JSONObject, arrival: Millis) throws(PayloadError) -> Response {
        guard let id = object["id"]?.stringValue, let msgId = msgId(id) else {
            throw PayloadError("reply needs a decimal 'id' string")
        }
        guard let code = object["code"]?.int64Value, let small = Int(exactly: code) else {
            throw PayloadError("reply needs an integer 'code'")
        }
        return Response(msgId: msgId, code: small == 200 ? 0 : small,
                        message: object["message"]?.stringValue, data: object["data"], time: arrival)
    }
}
