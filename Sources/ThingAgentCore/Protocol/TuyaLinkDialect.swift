import JSON

/// TuyaLink, Tuya IoT Core's MQTT protocol for custom devices, as Tuya's C device SDK speaks it (docs/protocol.md,
/// "TuyaLink"). A device is its TuyaLink deviceId in the agent; its topics are `tylink/{deviceId}/...`.
///
/// Messages carry `{"msgId","time","data"}` (`time` in seconds from the SDK, milliseconds from others); the
/// platform's answers echo the `msgId` with `code` 0 and `time` in seconds (the SDK reads it as 32-bit seconds). The
/// wire never names a directly connected device's product: the agent knows it from config `deviceProducts`, a
/// pairing's `--product`, or a gateway's bind of its sub-device.
package struct TuyaLinkDialect: Dialect {
    /// The product of each directly connected device the operator registered (config `deviceProducts`).
    package let products: [String: String]

    package init(products: [String: String] = [:]) {
        self.products = products
    }

    package static let name = "tuyalink"
    package var name: String { Self.name }
    package var trafficMeansOnline: Bool { true }

    /// The topics a device publishes (`DialectRoute.detail`), each with the topic its answer goes out on.
    package enum Topic: Int, CaseIterable, Sendable {
        case report, setResponse, eventTrigger, executeResponse, batchReport, modelGet, desiredGet, desiredDelete
        case bind, login, logout, topoAdd, topoDelete, topoGet
        case firmwareReport, progressReport, otaGet, timeRequest

        package var suffix: String {
            switch self {
            case .report: "thing/property/report"
            case .setResponse: "thing/property/set_response"
            case .eventTrigger: "thing/event/trigger"
            case .executeResponse: "thing/action/execute_response"
            case .batchReport: "thing/data/batch_report"
            case .modelGet: "thing/model/get"
            case .desiredGet: "thing/property/desired/get"
            case .desiredDelete: "thing/property/desired/delete"
            case .bind: "device/sub/bind"
            case .login: "device/sub/login"
            case .logout: "device/sub/logout"
            case .topoAdd: "device/topo/add"
            case .topoDelete: "device/topo/delete"
            case .topoGet: "device/topo/get"
            case .firmwareReport: "ota/firmware/report"
            case .progressReport: "ota/progress/report"
            case .otaGet: "ota/get"
            case .timeRequest: "ext/time/request"
            }
        }

        /// The topic of the platform's answer; nil for a message that gets none.
        package var answerSuffix: String? {
            switch self {
            case .report, .eventTrigger, .batchReport, .modelGet, .desiredGet, .desiredDelete, .bind, .topoAdd,
                 .topoDelete, .topoGet, .otaGet:
                suffix + "_response"
            case .timeRequest: "ext/time/response"
            case .setResponse, .executeResponse, .login, .logout, .firmwareReport, .progressReport: nil
            }
        }

        package var gatewayOnly: Bool {
            switch self {
            case .bind, .login, .logout, .topoAdd, .topoDelete, .topoGet: true
            default: false
            }
        }

        var kind: InboundKind {
            switch self {
            case .report: .properties
            case .setResponse: .response(.setProperties)
            case .executeResponse: .response(.action)
            case .eventTrigger: .event
            case .progressReport: .otaProgress
            case .batchReport, .bind, .login, .logout, .topoAdd, .topoDelete, .firmwareReport: .info
            case .modelGet, .desiredGet, .desiredDelete, .topoGet, .otaGet, .timeRequest: .status
            }
        }

        /// The suffix's bytes, matched against a topic's without making strings.
        fileprivate static let suffixes: [(bytes: [UInt8], topic: Topic)] = allCases.map { (Array($0.suffix.utf8), $0) }
    }

    package var subscriptions: [(filter: String, qos: Int)] {
        TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .device).map { ($0, 1) }
    }

    // MARK: devices

    /// Tuya's SDK connects as `tuyalink_<deviceId>` (its user name starts `<deviceId>|`).
    package func device(forClient client: String, user: String?) -> String? {
        guard client.hasPrefix(TuyaLinkTopics.clientPrefix) else { return nil }
        let device = String(client.dropFirst(TuyaLinkTopics.clientPrefix.count))
        return DeviceID.isValid(device) ? device : nil
    }

    /// The dialect, and the product when the operator registered one: recorded when the device is first heard.
    package func identity(of device: String) -> JSONObject? {
        var identity = JSONObject([("dialect", .string(Self.name))])
        if let product = products[device] { identity["productId"] = .string(product) }
        return identity
    }

    /// A TuyaLink id has no form of its own: a device the cache knows as one (`info.dialect`) goes out in it, and so
    /// does one registered in `deviceProducts` before it was ever heard.
    package func addresses(_ device: String) -> Bool { products[device] != nil }

    package func refusal(_ kind: RequestKind, device: String, productId: String?) -> String? {
        guard productId == nil, kind == .setProperties || kind == .action else { return nil }
        return "the product of \(device) is unknown (the TuyaLink wire does not name it): register it in config "
            + "deviceProducts ({\"\(device)\": \"<productId>\"}) and restart the agent, or pair it with --product"
    }

    // MARK: inbound

    package func route(_ topic: String) throws(Topics.ParseError) -> DialectRoute? {
        var topic = topic
        let routed: Result<DialectRoute?, Topics.ParseError> = topic.withUTF8 { bytes in
            let prefix = 7  // "tylink/"
            guard bytes.count > prefix + 2, bytes[0] == UInt8(ascii: "t"), bytes[1] == UInt8(ascii: "y"),
                  bytes[2] == UInt8(ascii: "l"), bytes[3] == UInt8(ascii: "i"), bytes[4] == UInt8(ascii: "n"),
                  bytes[5] == UInt8(ascii: "k"), bytes[6] == UInt8(ascii: "/"),
                  let slash = bytes[prefix...].firstIndex(of: UInt8(ascii: "/")) else { return .success(nil) }
            let suffix = UnsafeBufferPointer(rebasing: bytes[(slash + 1)...])
            guard let found = Topic.suffixes.first(where: { $0.bytes.count == suffix.count
                                                           && $0.bytes.elementsEqual(suffix) })?.topic else {
                return .success(nil)
            }
            let id = UnsafeBufferPointer(rebasing: bytes[prefix..<slash])
            guard DeviceID.isValid(utf8: id) else { return .failure(.invalidDeviceID) }
            return .success(DialectRoute(device: String(decoding: id, as: UTF8.self), kind: found.kind,
                                         detail: found.rawValue))
        }
        return try routed.get()
    }

    package func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage {
        guard let topic = Topic(rawValue: route.detail) else { throw PayloadError("not a TuyaLink topic") }
        let object = try PayloadDecoder.object(payload)
        let time = try PayloadDecoder.time(object["time"], key: "time") ?? arrival
        let message = try Self.message(topic, object, device: route.device, time: time, arrival: arrival)
        return DialectMessage(message, replies: Self.replies(topic, object, device: route.device, arrival: arrival))
    }

    private static func message(_ topic: Topic, _ object: JSONObject, device: String, time: Millis, arrival: Millis)
        throws(PayloadError) -> InboundMessage {
        switch topic {
        case .report:
            guard let data = object["data"]?.objectValue else { throw PayloadError("report has no 'data' object") }
            return .properties(try PayloadDecoder.properties(data, time: time))
        case .setResponse, .executeResponse:
            return .response(try response(object, time: time))
        case .eventTrigger:
            guard let data = object["data"]?.objectValue else { throw PayloadError("event has no 'data' object") }
            return .event(try event(data, time: time))
        case .batchReport:
            return .batch(try batch(object, device: device, time: time))
        case .bind, .login, .logout, .topoAdd, .topoDelete:
            return .batch(try subDevices(topic, of: device, object, time: arrival))
        case .firmwareReport:
            // At its arrival, as Alink's inform: its `time` has whole seconds only, and the device's information
            // recorded when it was first heard (its connection, its first message) or its gateway's login carries
            // the arrival's milliseconds, which a report made in the same second would lose to as stale.
            return .info(JSONObject([("firmwareVersion", .string(try firmwareVersion(object)))]), time: arrival)
        case .progressReport:
            return .otaProgress(try progress(object, time: time))
        case .modelGet:
            return .query(DeviceQuery(.thingModel, id: try msgId(object)))
        case .topoGet:
            return .query(DeviceQuery(.subDevices, id: try msgId(object)))
        case .otaGet:
            return .query(DeviceQuery(.firmware, id: try msgId(object)))
        case .desiredGet, .desiredDelete, .timeRequest:
            return .answeredOnly
        }
    }

    /// A message's `msgId`: a string of 1 to 32 characters (the SDK counts from "0").
    private static func msgId(_ object: JSONObject) throws(PayloadError) -> JSONValue {
        guard let id = object["msgId"], let text = id.stringValue,
              (1...PayloadDecoder.maxMsgIdLength).contains(text.utf8.count) else {
            throw PayloadError("needs a 'msgId' string of 1 to 32 characters")
        }
        return id
    }

    /// A device's answer to one of the agent's requests, by its `msgId`. The SDK cannot put a code in a
    /// `set_response` or `execute_response`: one without a code is the device's acceptance.
    private static func response(_ object: JSONObject, time: Millis) throws(PayloadError) -> Response {
        guard let msgId = try msgId(object).stringValue else { throw PayloadError("needs a 'msgId' string") }
        var code = 0
        if let value = object["code"], !value.isNull {
            guard let number = value.int64Value, let small = Int(exactly: number) else {
                throw PayloadError("'code' must be an integer")
            }
            code = small
        }
        return Response(msgId: msgId, code: code, message: try PayloadDecoder.optionalString(object["message"], key: "message"),
                        data: object["data"], time: time)
    }

    /// `{"eventCode","eventTime","outputParams"}`, as the native dialect's.
    private static func event(_ data: JSONObject, time: Millis) throws(PayloadError) -> ThingEvent {
        let eventTime = try PayloadDecoder.time(data["eventTime"], key: "eventTime") ?? time
        return try PayloadDecoder.event(data["eventCode"]?.stringValue, params: data["outputParams"], time: eventTime)
    }

    /// A batch report: the device's own `properties` and `events`, and each of `subDevices` with its `deviceId`.
    private static func batch(_ object: JSONObject, device: String, time: Millis) throws(PayloadError) -> [DeviceMessage] {
        guard let data = object["data"]?.objectValue else { throw PayloadError("batch report has no 'data' object") }
        var messages = try reported(data, device: device, time: time)
        if let subs = data["subDevices"] {
            guard let list = subs.arrayValue else { throw PayloadError("'subDevices' must be a list") }
            for sub in list {
                guard let entry = sub.objectValue, let id = entry["deviceId"]?.stringValue, DeviceID.isValid(id) else {
                    throw PayloadError("every sub-device of a batch report needs a valid 'deviceId'")
                }
                messages += try reported(entry, device: id, time: time)
            }
        }
        guard !messages.isEmpty else { throw PayloadError("batch report carries no properties or events") }
        return messages
    }

    /// `properties` (`{"code":{"value","time"}}`) and `events` (`{"eventCode":{"eventTime","outputParams"}}`) of
    /// one device in a batch report.
    private static func reported(_ entry: JSONObject, device: String, time: Millis) throws(PayloadError)
        -> [DeviceMessage] {
        var messages: [DeviceMessage] = []
        if let properties = entry["properties"] {
            guard let object = properties.objectValue else { throw PayloadError("'properties' must be an object") }
            if !object.isEmpty { messages.append(DeviceMessage(device, .properties(try PayloadDecoder.properties(object, time: time)))) }
        }
        if let events = entry["events"] {
            guard let object = events.objectValue else { throw PayloadError("'events' must be an object") }
            for (code, value) in object {
                var data = value.objectValue ?? JSONObject()
                data["eventCode"] = .string(code)
                messages.append(DeviceMessage(device, .event(try event(data, time: time))))
            }
        }
        return messages
    }

    /// A bound sub-device's id is the `clientId` (its hardware id, unique within its product) its gateway binds
    /// it with, or the `nodeId` Tuya's SDK demo sends beside it; the bind's answer gives it back as its `deviceId`,
    /// so a gateway that binds the same node again gets the same id.
    package static func boundID(_ entry: JSONValue) -> String? {
        for key in ["clientId", "nodeId"] {
            if let id = entry[key]?.stringValue, DeviceID.isValid(id) { return id }
        }
        return nil
    }

    /// What a gateway's bind, login, logout or topology message says of its sub-devices: bound or added (linked to
    /// the gateway, speaking TuyaLink, a bound one of the product it names), logged in (online) or out (offline),
    /// deleted (unlinked). The signs in a topology message are not checked: the agent holds no sub-device's secret,
    /// and the broker already let the gateway in.
    private static func subDevices(_ topic: Topic, of gateway: String, _ object: JSONObject, time: Millis)
        throws(PayloadError) -> [DeviceMessage] {
        let linked = JSONObject([("gatewayId", .string(gateway)), ("dialect", .string(name))])
        var messages: [DeviceMessage] = []
        for entry in try subDeviceList(topic, object) {
            switch topic {
            case .bind:
                guard let id = boundID(entry), let product = entry["productId"]?.stringValue, !product.isEmpty else {
                    throw PayloadError("every bound sub-device needs a 'productId' and a 'clientId' of the device id rule")
                }
                var info = linked
                info["productId"] = .string(product)
                messages.append(DeviceMessage(id, .info(info, time: time)))
            case .topoAdd:
                messages.append(DeviceMessage(try subDeviceID(entry), .info(linked, time: time)))
            case .topoDelete:
                messages.append(DeviceMessage(try subDeviceID(entry), .info(JSONObject([("gatewayId", .null)]), time: time)))
            case .login:
                let id = try subDeviceID(entry)
                messages.append(DeviceMessage(id, .info(linked, time: time)))
                messages.append(DeviceMessage(id, .status(online: true, time: time, via: .session)))
            default:
                messages.append(DeviceMessage(try subDeviceID(entry), .status(online: false, time: time, via: .session)))
            }
        }
        guard !messages.isEmpty else { throw PayloadError("names no sub-device ('data')") }
        return messages
    }

    /// The sub-devices a message names: `data` a list (of ids, a login's; or of objects), or `data.devices`.
    private static func subDeviceList(_ topic: Topic, _ object: JSONObject) throws(PayloadError) -> [JSONValue] {
        let data = object["data"]
        if let list = data?.arrayValue { return list }
        if let list = data?["devices"]?.arrayValue { return list }
        throw PayloadError("names no sub-device: 'data' must be a list, or have a 'devices' list")
    }

    /// A sub-device named by its id, or by an object with its `deviceId`.
    private static func subDeviceID(_ entry: JSONValue) throws(PayloadError) -> String {
        guard let id = entry.stringValue ?? entry["deviceId"]?.stringValue, DeviceID.isValid(id) else {
            throw PayloadError("a sub-device needs a 'deviceId' of the device id rule")
        }
        return id
    }

    /// `ota/firmware/report`: the main module's version (`otaChannel` 0), else the first channel's.
    private static func firmwareVersion(_ object: JSONObject) throws(PayloadError) -> String {
        let channels = object["data"]?["otaChannel"]?.arrayValue ?? []
        let main = channels.first { $0["channel"]?.int64Value == 0 } ?? channels.first
        guard let version = main?["version"]?.stringValue, !version.isEmpty else {
            throw PayloadError("a firmware report needs 'data.otaChannel' with a 'version'")
        }
        return version
    }

    /// `ota/progress/report`: `data.progress` 0 to 100 while downloading, and the failure (`state` other than
    /// the download's, or a negative progress) named by `errorCode` or `state`.
    private static func progress(_ object: JSONObject, time: Millis) throws(PayloadError) -> OTAProgressReport {
        guard let data = object["data"]?.objectValue else { throw PayloadError("progress has no 'data' object") }
        let value = data["progress"]
        guard let number = value?.int64Value ?? value?.stringValue.flatMap({ Int64($0) }), (-1...100).contains(number) else {
            throw PayloadError("progress needs 'data.progress' from 0 to 100")
        }
        let version = data["version"]?.stringValue ?? ""
        if number < 0 {
            let reason = data["errorCode"]?.stringValue ?? data["errorCode"]?.int64Value.map { String($0) } ?? "device"
            return OTAProgressReport(version: version, stage: .failed, progress: 0, failedCode: reason, time: time)
        }
        return OTAProgressReport(version: version, stage: number >= 100 ? .flashing : .downloading,
                                 progress: Int(number), failedCode: "", time: time)
    }

    // MARK: answers

    /// The answers the platform owes a device for a message: its report's when it asked (`sys.ack` 1), an event's,
    /// a batch report's when asked, every bind, topology and time request, and desired properties (none kept).
    private static func replies(_ topic: Topic, _ object: JSONObject, device: String, arrival: Millis)
        -> [OutboundMessage] {
        // Most reports ask for nothing: decided before any answer's topic is made (this runs for every report).
        if topic == .report || topic == .batchReport, object["sys"]?["ack"]?.int64Value != 1 { return [] }
        guard let suffix = topic.answerSuffix, let msgId = object["msgId"] else { return [] }
        let answer = "tylink/\(device)/\(suffix)"
        switch topic {
        case .report, .batchReport:
            return [reply(answer, msgId: msgId, arrival: arrival)]
        case .eventTrigger, .desiredDelete:
            // An event is answered whether or not it asked: Tuya's SDK has no way to ask for it.
            return [reply(answer, msgId: msgId, arrival: arrival)]
        case .desiredGet:
            // The agent keeps no desired values: a set goes to the device at once, or fails.
            return [reply(answer, msgId: msgId, arrival: arrival, data: .object(["properties": .object([:])]))]
        case .bind:
            let bound: [JSONValue] = (object["data"]?.arrayValue ?? []).map { entry in
                var answered = JSONObject([("productId", entry["productId"] ?? .null)])
                for key in ["clientId", "nodeId"] { if let value = entry[key] { answered[key] = value } }
                answered["deviceId"] = Self.boundID(entry).map(JSONValue.string) ?? .null
                return .object(answered)
            }
            return [reply(answer, msgId: msgId, arrival: arrival, data: .array(bound))]
        case .topoAdd, .topoDelete:
            let named: [JSONValue] = (object["data"]?.arrayValue ?? []).map { entry in
                .object(JSONObject([("deviceId", entry.stringValue.map(JSONValue.string) ?? entry["deviceId"] ?? .null),
                                    ("code", .integer(0))]))
            }
            return [reply(answer, msgId: msgId, arrival: arrival, data: .array(named))]
        case .timeRequest:
            // `dst` (t1, the device's send time, echoed), `srt` (t2, the arrival) and `sst` (t3, the answer's),
            // in milliseconds: the device's clock is then (t2 + t3 + t4 - t1) / 2.
            var data = JSONObject([("bizType", object["data"]?["bizType"] ?? .string("NTP"))])
            if let sent = object["data"]?["dst"] { data["dst"] = sent }
            data["srt"] = .integer(arrival)
            data["sst"] = .integer(Timestamp.now())
            return [reply(answer, msgId: msgId, arrival: arrival, data: .object(data))]
        case .modelGet, .topoGet, .otaGet, .setResponse, .executeResponse, .login, .logout, .firmwareReport,
             .progressReport:
            return []
        }
    }

    /// `{"msgId","time","code":0,"data"}`: `time` in seconds, which the SDK reads as 32-bit seconds.
    private static func reply(_ topic: String, msgId: JSONValue, arrival: Millis, code: Int = 0,
                              data: JSONValue? = nil, message: String? = nil) -> OutboundMessage {
        var payload = JSONObject([("msgId", msgId), ("time", .integer(arrival / 1000)), ("code", .integer(Int64(code)))])
        if let data { payload["data"] = data }
        if let message { payload["message"] = .string(message) }
        return OutboundMessage(topic: topic, payload: JSONValue.object(payload).serializedBytes(), qos: 0)
    }

    /// The SDK's MQTT buffer (coreMQTT's `CORE_MQTT_BUFFER_SIZE`): it reads a packet's remaining length into it,
    /// and drops a downlink whose remaining length is over this many bytes without a word.
    package static let maxDownlinkBytes = 2048
    /// What a request's topic and payload may take together (`Agent.send` refuses a longer one): the buffer less
    /// the topic's length and the packet id.
    package var maxDownlinkBytes: Int? { Self.maxDownlinkBytes - 4 }

    /// Whether the SDK takes `message`: its remaining length, the topic's length (2 bytes), the topic, a packet id
    /// when it is delivered at QoS 1 (the SDK subscribes at QoS 1: the agent's QoS decides) and the payload, is at
    /// most `maxDownlinkBytes`. The payload alone is not the measure: a long topic leaves it less room.
    package static func fits(_ message: OutboundMessage) -> Bool {
        packetBytes(message) <= maxDownlinkBytes
    }

    /// `message`'s remaining length as the SDK receives it.
    package static func packetBytes(_ message: OutboundMessage) -> Int {
        2 + message.topic.utf8.count + (message.qos > 0 ? 2 : 0) + message.payload.count
    }

    package func answer(_ query: DeviceQuery, device: String, with answer: QueryAnswer) -> OutboundMessage? {
        let now = Timestamp.now()
        switch (query.kind, answer) {
        case (.thingModel, .thingModel(let model)):
            let topic = TuyaLinkTopic(suffix: "thing/model/get_response", publisher: .agent, gatewayOnly: false)
                .topic(device)
            guard let model else {
                return Self.reply(topic, msgId: query.id, arrival: now, code: 404,
                                  message: "no thing model is known for this device's product")
            }
            let reply = Self.reply(topic, msgId: query.id, arrival: now, data: .object(TuyaModel.json(model)))
            guard Self.fits(reply) else {
                return Self.reply(topic, msgId: query.id, arrival: now, code: 413, message: "the model's answer is "
                                  + "\(Self.packetBytes(reply)) bytes with its topic; the device SDK takes at most 2048")
            }
            return reply
        case (.subDevices, .subDevices(let devices)):
            // As many as the SDK takes in one answer (each entry about 100 bytes at most).
            var list: [JSONValue] = [], size = 0
            for (index, sub) in devices.enumerated() {
                var entry = JSONObject([("deviceId", .string(sub.id)), ("clientId", .string(sub.id))])
                if let product = sub.productId { entry["productId"] = .string(product) }
                entry["indexId"] = .integer(Int64(index + 1))
                let value = JSONValue.object(entry)
                size += value.serializedBytes().count + 1
                guard size <= Self.maxDownlinkBytes - 300 else { break }
                list.append(value)
            }
            return Self.reply("tylink/\(device)/device/topo/get_response", msgId: query.id, arrival: now, data: .array(list))
        case (.firmware, .firmware(let image)):
            let data = image.map { Self.firmwareOffer($0) } ?? JSONObject()
            return Self.reply("tylink/\(device)/ota/get_response", msgId: query.id, arrival: now, data: .object(data))
        default:
            return nil
        }
    }

    /// An image as an upgrade push and an answer to `ota/get` carry it: the main module's channel 0, `size` a
    /// string as Tuya's are, and the catalog's SHA-256 (Tuya's own carry an MD5 the catalog does not keep).
    private static func firmwareOffer(_ image: FirmwareCatalog.Image) -> JSONObject {
        var offer = JSONObject([("channel", .integer(0)), ("version", .string(image.version)), ("url", .string(image.url)),
                                ("sha256", .string(image.sha256.lowercased())), ("upgradeType", .integer(0))])
        if let size = image.size { offer["size"] = .string(String(size)) }
        return offer
    }

    // MARK: outbound

    package func request(_ kind: RequestKind, device: String, msgId: String, data: JSONValue?, time: Millis)
        -> OutboundMessage? {
        func message(_ suffix: String, _ data: JSONValue, answered: Bool = true) -> OutboundMessage {
            let payload = JSONObject([("msgId", .string(msgId)), ("time", .integer(time / 1000)), ("data", data)])
            return OutboundMessage(topic: "tylink/\(device)/\(suffix)", payload: JSONValue.object(payload).serializedBytes(),
                                   qos: 1, answered: answered)
        }
        switch kind {
        case .setProperties:
            return message("thing/property/set", data ?? .object([:]))
        case .action:
            guard let name = data?["actionCode"]?.stringValue else { return nil }
            return message("thing/action/execute", .object(JSONObject([
                ("actionCode", .string(name)), ("inputParams", data?["inputParams"] ?? .object([:])),
            ])))
        case .otaStart:
            guard let image = data, let url = image["url"]?.stringValue, let version = image["version"]?.stringValue,
                  let sha256 = image["sha256"]?.stringValue else { return nil }
            let offer = Self.firmwareOffer(FirmwareCatalog.Image(version: version, url: url, sha256: sha256,
                                                                 size: image["size"]?.int64Value))
            // Not answered: progress and the new version follow on their own topics.
            return message("ota/issue", .object(offer), answered: false)
        case .getInfo, .wifiScan, .gatewayTransferStart:
            return nil
        }
    }
}
