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
        /// Questions the platform answers from what it knows: the firmware to run, a gateway's sub-devices.
        case firmwareGet, topoGet
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
            ("/sys/+/+/thing/topo/get", 1),
            ("/sys/+/+/thing/ota/firmware/get", 1),
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
        let whole = topic
        var topic = topic
        let routed: Result<DialectRoute?, Topics.ParseError> = topic.withUTF8 { bytes in
            // A leading slash: the first level is empty.
            guard let levels = TopicLevels(bytes), levels.count >= 5, levels[0].isEmpty,
                  let found = Self.topic(levels) else { return .success(nil) }
            let (pk, dn) = (levels[found.pk], levels[found.pk + 1])
            guard !pk.contains(UInt8(ascii: ".")), DeviceID.isValid(utf8: pk), DeviceID.isValid(utf8: dn),
                  pk.count + 1 + dn.count <= DeviceID.maxLength else { return .failure(.invalidDeviceID) }
            var device = levels.string(found.pk)
            device.append(".")
            device.append(levels.string(found.pk + 1))
            // An event's identifier is its topic's level: `thing/event/{id}/post`.
            let name = found.topic == .eventPost ? levels.string(6) : nil
            return .success(DialectRoute(device: device, kind: Self.kind(found.topic), detail: found.topic.rawValue,
                                         name: name, topic: whole))
        }
        return try routed.get()
    }

    /// Which of its topics this is, and the level of its product key (the device name follows it).
    private static func topic(_ levels: TopicLevels) -> (pk: Int, topic: Topic)? {
        let count = levels.count
        if levels.level(1, is: "sys") {
            guard count >= 7, levels.level(4, is: "thing") else { return nil }
            return sysTopic(levels).map { (2, $0) }
        }
        if levels.level(1, is: "ota") {
            guard count == 6, levels.level(2, is: "device") else { return nil }
            if levels.level(3, is: "inform") { return (4, .otaInform) }
            if levels.level(3, is: "progress") { return (4, .otaProgress) }
            return nil
        }
        guard levels.level(1, is: "ext") else { return nil }
        if count == 6, levels.level(2, is: "ntp"), levels.level(5, is: "request") { return (3, .ntpRequest) }
        guard count == 7, levels.level(2, is: "session"), levels.level(5, is: "combine") else { return nil }
        if levels.level(6, is: "login") { return (3, .login) }
        if levels.level(6, is: "logout") { return (3, .logout) }
        if levels.level(6, is: "batch_login") { return (3, .batchLogin) }
        if levels.level(6, is: "batch_logout") { return (3, .batchLogout) }
        return nil
    }

    /// `/sys/{pk}/{dn}/thing/...`, by the levels after `thing`.
    private static func sysTopic(_ levels: TopicLevels) -> Topic? {
        switch levels.count {
        case 8 where levels.level(5, is: "event") && levels.level(7, is: "post"):
            return levels.level(6, is: "property") ? .propertyPost : .eventPost
        case 8 where levels.level(5, is: "service"):
            return levels.level(6, is: "property") && levels.level(7, is: "set_reply") ? .setReply : nil
        case 8 where levels.level(5, is: "ota"):
            return levels.level(6, is: "firmware") && levels.level(7, is: "get") ? .firmwareGet : nil
        case 7 where levels.level(5, is: "service"):
            return levels.level(6, endsWith: "_reply") ? .serviceReply : .serviceCall
        case 7 where levels.level(5, is: "deviceinfo"):
            return levels.level(6, is: "update") ? .tagsUpdate : levels.level(6, is: "delete") ? .tagsDelete : nil
        case 7 where levels.level(5, is: "topo"):
            if levels.level(6, is: "add") { return .topoAdd }
            if levels.level(6, is: "delete") { return .topoDelete }
            return levels.level(6, is: "get") ? .topoGet : nil
        default:
            return nil
        }
    }

    private static func kind(_ topic: Topic) -> InboundKind {
        switch topic {
        case .propertyPost: .properties
        case .eventPost: .event
        case .setReply: .response(.setProperties)
        case .tagsUpdate, .tagsDelete: .status
        case .otaInform: .info
        case .otaProgress: .otaProgress
        case .serviceReply: .response(.action)
        case .serviceCall: .status
        case .ntpRequest: .status
        case .topoAdd, .topoDelete, .login, .logout, .batchLogin, .batchLogout: .info
        case .firmwareGet, .topoGet: .status
        }
    }

    package func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage {
        guard let topic = Topic(rawValue: route.detail) else { throw PayloadError("not an Alink topic") }
        let object = try PayloadDecoder.object(payload)
        let message = try Self.message(topic, object, route: route, arrival: arrival)
        return DialectMessage(message, replies: Self.replies(topic, object, route: route, arrival: arrival))
    }

    private static func message(_ topic: Topic, _ object: JSONObject, route: DialectRoute, arrival: Millis)
        throws(PayloadError) -> InboundMessage {
        let device = route.device
        switch topic {
        case .propertyPost:
            guard let params = object["params"]?.objectValue else { throw PayloadError("post has no 'params' object") }
            return .properties(try PayloadDecoder.properties(params, time: arrival))
        case .eventPost:
            // `{"params":{"value":{...},"time":t}}`: Linkkit sends no time (the arrival is used).
            let params = object["params"]
            let time = try PayloadDecoder.time(params?["time"], key: "params.time") ?? arrival
            return .event(try PayloadDecoder.event(route.name, params: params?["value"], time: time))
        case .setReply:
            return .response(try Self.response(object, arrival: arrival))
        case .tagsUpdate, .tagsDelete:
            // `{"params":[{"attrKey","attrValue"}]}` (a delete names only the keys): into the device's `tags`.
            guard let list = object["params"]?.arrayValue else { throw PayloadError("a tags message has no 'params' list") }
            var update: [(key: String, value: JSONValue)] = [], delete: [String] = []
            for entry in list {
                guard let key = entry["attrKey"]?.stringValue, !key.isEmpty, key.utf8.count <= 128 else {
                    throw PayloadError("a tag needs an 'attrKey' string of 1 to 128 bytes")
                }
                if topic == .tagsDelete {
                    delete.append(key)
                } else {
                    guard let value = entry["attrValue"]?.stringValue else {
                        throw PayloadError("tag '\(key.prefix(80))' needs an 'attrValue' string")
                    }
                    update.append((key, .string(value)))
                }
            }
            return .tags(update: update, delete: delete, time: arrival)
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
        case .firmwareGet:
            return .query(DeviceQuery(.firmware, id: object["id"] ?? .string("0")))
        case .topoGet:
            return .query(DeviceQuery(.subDevices, id: object["id"] ?? .string("0")))
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
                messages.append(DeviceMessage(device, .status(online: true, time: arrival, via: .session)))
            default:
                messages.append(DeviceMessage(device, .status(online: false, time: arrival, via: .session)))
            }
        }
        return messages
    }

    /// The answers the platform owes the device for a message it decoded: on the message's own topic with `_reply`
    /// appended, but for NTP's.
    private static func replies(_ topic: Topic, _ object: JSONObject, route: DialectRoute, arrival: Millis)
        -> [OutboundMessage] {
        let replyTopic = route.topic + "_reply"
        switch topic {
        case .propertyPost:
            return [Self.reply(replyTopic, to: object, method: "thing.event.property.post")]
        case .eventPost:
            return [Self.reply(replyTopic, to: object, method: "thing.event.\(route.name ?? "post").post")]
        case .tagsUpdate:
            return [Self.reply(replyTopic, to: object, method: "thing.deviceinfo.update")]
        case .tagsDelete:
            return [Self.reply(replyTopic, to: object, method: "thing.deviceinfo.delete")]
        case .ntpRequest:
            guard let (pk, dn) = split(route.device) else { return [] }
            guard let sent = object["deviceSendTime"] else { return [] }
            // The times as strings of milliseconds, as Alibaba's documents give them.
            let answer = JSONObject([("deviceSendTime", sent), ("serverRecvTime", .string(String(arrival))),
                                     ("serverSendTime", .string(String(arrival)))])
            return [OutboundMessage(topic: "/ext/ntp/\(pk)/\(dn)/response",
                                    payload: JSONValue.object(answer).serializedBytes(), qos: 0)]
        case .topoAdd, .topoDelete:
            let name = topic == .topoAdd ? "add" : "delete"
            return [Self.reply(replyTopic, to: object, method: "thing.topo.\(name)",
                               data: Self.named(object["params"]?.arrayValue))]
        case .login, .logout, .batchLogin, .batchLogout:
            let name = ["login", "logout", "batch_login", "batch_logout"][topic.rawValue - Topic.login.rawValue]
            let list = topic == .batchLogin ? object["params"]?["deviceList"]?.arrayValue
                : topic == .batchLogout ? object["params"]?.arrayValue : object["params"].map { [$0] }
            let named = Self.named(list)
            let data: JSONValue = topic == .login || topic == .logout ? named.arrayValue?.first ?? .object([:]) : named
            return [Self.reply(replyTopic, to: object, method: "combine.\(name)", data: data)]
        case .setReply, .otaInform, .otaProgress, .serviceReply, .serviceCall, .firmwareGet, .topoGet:
            return []
        }
    }

    /// `{"id","code":200,"data":{},"message":"success","version":"1.0","method"}`: every field the SDK checks.
    private static func reply(_ topic: String, to request: JSONObject, method: String,
                              data: JSONValue = .object(JSONObject())) -> OutboundMessage {
        // Written out rather than built as an object and serialized: one is sent for every post.
        var payload: [UInt8] = []
        payload.reserveCapacity(96 + method.utf8.count)
        payload.append(contentsOf: #"{"id":"#.utf8)
        Self.appendID(request["id"] ?? .string("0"), to: &payload)
        payload.append(contentsOf: #","code":200,"data":"#.utf8)
        payload.append(contentsOf: data.serializedBytes())
        payload.append(contentsOf: #","message":"success","version":"1.0","method":"#.utf8)
        // A method is letters, digits, `_` and dots (an event's identifier passed the action-name rule): nothing to
        // escape.
        payload.append(UInt8(ascii: "\""))
        payload.append(contentsOf: method.utf8)
        payload.append(UInt8(ascii: "\""))
        payload.append(UInt8(ascii: "}"))
        return OutboundMessage(topic: topic, payload: payload, qos: 0)
    }

    /// A request's `id` as it came: a decimal string (Linkkit's) written as is, anything else serialized.
    private static func appendID(_ id: JSONValue, to payload: inout [UInt8]) {
        if case .string(let text) = id, !text.isEmpty, text.utf8.count <= 20,
           text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            payload.append(UInt8(ascii: "\""))
            payload.append(contentsOf: text.utf8)
            payload.append(UInt8(ascii: "\""))
        } else {
            payload.append(contentsOf: id.serializedBytes())
        }
    }

    /// `[{"productKey","deviceName"}]` of the sub-devices a request named, as its reply's `data`.
    private static func named(_ list: [JSONValue]?) -> JSONValue {
        .array((list ?? []).map { entry in
            .object(JSONObject([("productKey", entry["productKey"] ?? .null), ("deviceName", entry["deviceName"] ?? .null)]))
        })
    }

    // MARK: outbound

    /// `thing/ota/firmware/get_reply` with the image as an upgrade push carries it (`data` empty when there is
    /// none: the SDK then does nothing), `thing/topo/get_reply` with the sub-devices' `productKey` and `deviceName`.
    package func answer(_ query: DeviceQuery, device: String, with answer: QueryAnswer) -> OutboundMessage? {
        guard let (pk, dn) = Self.split(device) else { return nil }
        let request = JSONObject([("id", query.id)])
        switch (query.kind, answer) {
        case (.firmware, .firmware(let image)):
            let data = image.flatMap(Self.imageData).map(JSONValue.object) ?? .object([:])
            return Self.reply("/sys/\(pk)/\(dn)/thing/ota/firmware/get_reply", to: request,
                              method: "thing.ota.firmware.get", data: data)
        case (.subDevices, .subDevices(let devices)):
            let list = devices.compactMap { Self.split($0.id) }.map { sub in
                JSONValue.object(JSONObject([("productKey", .string(String(sub.productKey))),
                                             ("deviceName", .string(String(sub.deviceName)))]))
            }
            return Self.reply("/sys/\(pk)/\(dn)/thing/topo/get_reply", to: request, method: "thing.topo.get",
                              data: .array(list))
        default:
            return nil
        }
    }

    /// An image as Linkkit takes it: every one of url, version, size, sign and signMethod, or the device hears
    /// nothing; `SHA256` with the lowercase hex digest (`MD5` in capitals crashes its download).
    private static func imageData(_ image: FirmwareCatalog.Image) -> JSONObject? {
        guard let size = image.size, size > 0 else { return nil }
        return JSONObject([
            ("size", .integer(size)), ("version", .string(image.version)), ("url", .string(image.url)),
            ("sign", .string(image.sha256.lowercased())), ("signMethod", .string("SHA256")),
        ])
    }

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
            // The push Linkkit takes (`imageData`). It is not answered: progress and the new version follow on their
            // own topics.
            guard let image = data, let url = image["url"]?.stringValue, let version = image["version"]?.stringValue,
                  let sha256 = image["sha256"]?.stringValue,
                  let offer = Self.imageData(FirmwareCatalog.Image(version: version, url: url, sha256: sha256,
                                                                   size: image["size"]?.int64Value)) else {
                return nil
            }
            let payload = JSONObject([
                ("code", .string("1000")), ("id", .integer(Int64(id) ?? 0)), ("message", .string("success")),
                ("data", .object(offer)),
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
