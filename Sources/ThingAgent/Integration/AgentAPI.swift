import JSON
import MQTT

/// The request/response API over MQTT (docs/mqtt-api.md, "The API over MQTT").
///
/// Requests arrive on `thing-agent/api/<clientId>/request/<method>` as a JSON object; the answer goes to the MQTT 5
/// response topic (with the correlation data echoed) or, for MQTT 3.1.1 clients, to the payload's `replyTo`.
/// The receive path only hands such a message to this queue (and only after the topic failed to parse as a device
/// topic); one consumer task answers, so reads never touch SQLite's file lock on the network thread.
final class APIQueue: Sendable {
    /// `thing-agent/api/<clientId>/request/`
    let prefix: String
    let stream: AsyncStream<MQTTMessage>
    private let continuation: AsyncStream<MQTTMessage>.Continuation
    let counters: IntegrationCounters
    static let limit = 1024

    init(clientID: String, counters: IntegrationCounters) {
        prefix = "thing-agent/api/\(clientID)/request/"
        (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.limit))
        self.counters = counters
    }

    /// The subscription that brings the requests.
    var filter: String { prefix + "+" }

    /// Called on the receive path for topics outside the device tree: takes API requests, refuses anything else.
    func accept(_ message: MQTTMessage) -> Bool {
        guard message.topic.hasPrefix(prefix) else { return false }
        if case .dropped = continuation.yield(message) {
            counters.requestsDropped.add(1, ordering: .relaxed)
        }
        return true
    }

    func finish() {
        continuation.finish()
    }
}

extension EditError {
    /// The API's code for it: 400 a bad value, 404 an unknown device, group, network, scene or link, 409 a name
    /// taken, 422 a scene value or link code the thing model refuses.
    var apiCode: Int {
        switch self {
        case .invalid: 400
        case .modelRefused: 422
        case .unknownDevice, .unknownGroup, .unknownNetwork, .unknownScene, .unknownLink: 404
        case .groupExists, .sceneExists, .linkExists: 409
        }
    }
}

/// A request the API cannot answer: `code` is HTTP-like (400 bad request, 404 unknown device or method,
/// 409 conflict, 503 the agent cannot do it now).
struct APIError: Error {
    let code: Int
    let message: String
    /// A device request's error (`RequestError.json`), answered beside `message` as `error`.
    var error: JSONObject?

    init(_ code: Int, _ message: String, error: JSONObject? = nil) {
        self.code = code
        self.message = message
        self.error = error
    }
}

extension Agent {
    /// The methods the API answers.
    public static let apiMethods = [
        "info", "devices", "set", "edit", "group", "network", "remove", "detail", "health", "firmware", "ota",
        "fetch", "wifiScan", "gateways", "transfer", "scenes", "links", "groupSet", "pair", "pairRevoke", "pairings",
        "sceneList", "linkList",
    ]

    /// Answers requests until the queue ends or the task is cancelled. `set`, `remove` and `detail` wait for
    /// devices or the broker, so they run beside the loop (a slow device never holds up an `info`).
    func serveAPI(_ queue: APIQueue) async {
        await withDiscardingTaskGroup { group in
            for await message in queue.stream {
                let method = String(message.topic.dropFirst(queue.prefix.count))
                if Self.waitingMethods.contains(method) {
                    group.addTask { await self.answer(message, method: method, counters: queue.counters) }
                } else {
                    await answer(message, method: method, counters: queue.counters)
                }
            }
            group.cancelAll()
        }
    }

    private func answer(_ message: MQTTMessage, method: String, counters: IntegrationCounters) async {
        // A request is an act of the moment: the broker replays a retained one at every subscribe, so running it
        // would repeat a `remove` or a forced `set` at every start.
        if message.retain {
            counters.requestsDropped.add(1, ordering: .relaxed)
            ingestor.counters.countGuard(.apiRetainedRefused)
            if apiLogLimiter.shouldLog("retained", now: Timestamp.now()) {
                logger.warning("refused a retained API request: requests are not kept by the broker",
                               metadata: ["topic": message.topic])
            }
            return
        }
        // The device payloads' bound holds here too: a huge request is not parsed at all.
        let oversized = message.payload.count > PayloadDecoder.maxPayloadBytes
        let request = oversized ? nil : (try? JSONParser.parse(message.payload, maxDepth: PayloadDecoder.maxDepth))?.objectValue
        guard let replyTo = message.responseTopic ?? request?["replyTo"]?.stringValue,
              !replyTo.isEmpty, !replyTo.contains("+"), !replyTo.contains("#") else {
            counters.requestsDropped.add(1, ordering: .relaxed)
            logger.notice("dropped an API request with nowhere to answer (no response topic, no replyTo)",
                          metadata: ["topic": message.topic])
            return
        }
        // Answers go only under the reply prefix: a reply topic elsewhere would let any client make the agent
        // publish where it may write (a device's unbind topic, the event feed, its own status).
        guard let requester = ReplyTopics.client(of: replyTo, prefix: configuration.replyPrefix) else {
            counters.requestsDropped.add(1, ordering: .relaxed)
            ingestor.counters.countGuard(.apiReplyRefused)
            if apiLogLimiter.shouldLog("reply", now: Timestamp.now()) {
                logger.warning("refused an API request: its reply topic is outside the reply prefix", metadata: [
                    "topic": message.topic, "replyTo": String(replyTo.prefix(200)),
                    "replyPrefix": configuration.replyPrefix])
            }
            return
        }
        var reply = JSONObject([("id", request?["id"] ?? .null), ("method", .string(method))])
        do {
            guard apiRateLimiter.allow(requester, now: ContinuousClock.now) else {
                ingestor.counters.countGuard(.apiRateLimited)
                throw APIError(429, "too many requests from '\(requester)': at most \(configuration.apiRateLimit) "
                    + "per second; try again later")
            }
            // Checked after the client's own budget, so that one busy client does not spend the others' share.
            guard apiTotalRateLimiter.allow("", now: ContinuousClock.now) else {
                ingestor.counters.countGuard(.apiRateLimited)
                throw APIError(429, "too many requests in all: at most \(configuration.apiRateLimitTotal) per "
                    + "second from all clients together; try again later")
            }
            if oversized { throw APIError(400, "the request is over 256 KiB") }
            guard let request else { throw APIError(400, "the request is not a JSON object") }
            let (data, extra) = try await apiResult(method, request)
            reply["code"] = .integer(0)
            reply["data"] = data
            for (key, value) in extra { reply[key] = value }
            counters.requestsAnswered.add(1, ordering: .relaxed)
        } catch {
            let failure = error as? APIError ?? APIError(500, "\(error)")
            reply["code"] = .integer(Int64(failure.code))
            reply["message"] = .string(failure.message)
            if let error = failure.error { reply["error"] = .object(error) }
            counters.requestsRejected.add(1, ordering: .relaxed)
        }
        do {
            try await client.publish(replyTo, payload: JSONValue.object(reply).serializedBytes(), qos: .atLeastOnce,
                                     correlationData: message.correlationData)
        } catch {
            logger.warning("could not send an API answer", metadata: ["topic": replyTo, "error": "\(error)"])
        }
    }

    /// The answer's `data`, and fields beside it (`next` of a `devices` page).
    private func apiResult(_ method: String, _ request: JSONObject) async throws -> (JSONValue, JSONObject) {
        func device() throws -> String {
            guard let id = request["device"]?.stringValue else { throw APIError(400, "'device' is missing") }
            guard DeviceID.isValid(id) else { throw APIError(400, "'\(id)' is not a device id") }
            return id
        }
        func known() throws -> (String, DeviceSnapshot) {
            let id = try device()
            guard let snapshot = cache.device(id) else { throw APIError(404, "unknown device '\(id)'") }
            return (id, snapshot)
        }
        let now = Timestamp.now()
        switch method {
        case "health":
            return (.object(health().json), [:])
        case "info":
            let (id, snapshot) = try known()
            return (.object(snapshot.json(now: now, metadata: try? local?.metadata(id))), [:])
        case "devices":
            return try devicesPage(request, now: now)
        case "set":
            let id = try device()
            guard let data = request["data"]?.objectValue, !data.isEmpty else {
                throw APIError(400, "'data' must be a non-empty object of property codes and values")
            }
            let timeout = try Self.timeout(request["timeout"])
            var values: [String: JSONValue] = [:]
            for (code, value) in data { values[code] = value }
            let outcome = await sendPropertySet(deviceId: id, values, timeout: timeout,
                                                force: request["force"]?.boolValue ?? false)
            return (.object(outcome.apiJSON), [:])
        case "edit", "group", "network", "scenes", "links":
            do {
                if request["action"]?.stringValue == "list", let listed = try listLocal(method) { return (listed, [:]) }
                guard let change = try LocalChange(method: method, request: request) else { throw APIError(404, method) }
                return (try apply(change), [:])
            } catch let error as EditError {
                throw APIError(error.apiCode, error.description)
            }
        case "sceneList", "linkList":
            // The listings alone, on topics of their own: an ACL can let a service read scenes and links without
            // letting it change them (`scenes` and `links` also create and delete).
            return (try listLocal(method == "sceneList" ? "scenes" : "links") ?? .null, [:])
        case "groupSet":
            return (try await apiGroupSet(request), [:])
        case "remove":
            let (id, _) = try known()
            do {
                return (.object(try await removeDevice(id).json), [:])
            } catch let error as EditError {
                throw APIError(404, error.description)
            } catch {
                throw APIError(503, "\(error)")
            }
        case "detail":
            let (id, _) = try known()
            return (try await apiDetail(id, request), [:])
        case "firmware":
            return (try apiFirmware(request), [:])
        case "ota":
            let (id, snapshot) = try known()
            return (try await apiOTA(request, device: id, snapshot: snapshot), [:])
        case "fetch", "wifiScan", "gateways", "transfer":
            return (try await apiDeviceRequest(method, request, device: try device()), [:])
        case "pair", "pairRevoke", "pairings":
            return (try await apiPairing(method, request), [:])
        default:
            throw APIError(404, "unknown method '\(method)'; methods: \(Self.apiMethods.joined(separator: ", "))")
        }
    }
}

extension Agent {
    /// The `list` action of `scenes` and `links`: every scene or link (nil for the other methods).
    func listLocal(_ method: String) throws -> JSONValue? {
        switch method {
        case "scenes": .array(try requireLocal().scenes().map(\.json))
        case "links": .array(try requireLocal().links().map(\.json))
        default: nil
        }
    }

    /// `groupSet`: `{"group","data","force","timeout"}`, answered with the group's `GroupSetReport`.
    func apiGroupSet(_ request: JSONObject) async throws -> JSONValue {
        guard let name = request["group"]?.stringValue else { throw APIError(400, "'group' is missing or not a string") }
        guard let data = request["data"]?.objectValue, !data.isEmpty else {
            throw APIError(400, "'data' must be a non-empty object of property codes and values")
        }
        let timeout = try Self.timeout(request["timeout"])
        var values: [String: JSONValue] = [:]
        for (code, value) in data { values[code] = value }
        do {
            return .object(try await setGroup(name, values, timeout: timeout,
                                              force: request["force"]?.boolValue ?? false).json)
        } catch let error as EditError {
            throw APIError(error.apiCode, error.description)
        }
    }

    /// One page of `devices`, in device-id order: at most `limit` (default `apiPageSize`) devices with an id after
    /// `after`; `next` is the id to pass as `after` for the next page, null on the last one.
    func devicesPage(_ request: JSONObject, now: Millis) throws -> (JSONValue, JSONObject) {
        var limit = configuration.apiPageSize
        if let raw = request["limit"], !raw.isNull {
            guard let n = raw.int64Value, n >= 1, n <= AgentConfiguration.maxPageSize else {
                throw APIError(400, "'limit' must be a whole number from 1 to \(AgentConfiguration.maxPageSize)")
            }
            limit = Int(n)
        }
        var after: String?
        if let raw = request["after"], !raw.isNull {
            guard let id = raw.stringValue else { throw APIError(400, "'after' must be a device id (a string)") }
            after = id
        }
        let offline = request["offline"]?.boolValue == true
        let gateway = request["gateway"]?.stringValue
        // One more than the page: whether there is a next one.
        let matching = cache.page(after: after, count: limit + 1) { device in
            (!offline || device.online == false) && (gateway.map { device.info.gatewayId == $0 } ?? true)
        }
        let page = matching.prefix(limit)
        let metadata = (try? local?.allMetadata()) ?? [:]
        let next: JSONValue = matching.count > limit ? page.last.map { .string($0.id) } ?? .null : .null
        return (.array(page.map { .object($0.json(now: now, metadata: metadata[$0.id])) }),
                JSONObject([("next", next)]))
    }

    /// A request's `timeout` in seconds: absent is the default; anything but a number of seconds above zero and
    /// within `InputBounds.maxSeconds` is a bad request (`-1e300` once ended the daemon).
    static func timeout(_ value: JSONValue?) throws -> Duration? {
        guard let value, !value.isNull else { return nil }
        guard let seconds = value.doubleValue.flatMap({ InputBounds.seconds($0) }) else {
            throw APIError(400, "'timeout' must be a number of seconds above 0 and at most \(Int(InputBounds.maxSeconds))")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}
