import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// The request/response API over MQTT (docs/mqtt-api.md, "The API over MQTT").
///
/// Requests arrive on `thing-agent/api/<clientId>/request/<method>` as a JSON object; the answer goes to the MQTT 5
/// response topic (with the correlation data echoed) or, for MQTT 3.1.1 clients, to the payload's `replyTo`.
/// The receive path only hands such a message to this queue (and only after the topic failed to parse as a device
/// topic); one consumer task answers, so reads never touch SQLite's file lock on the network thread.
final class APIQueue: Sendable {
    /// `thing-agent/api/<name>/request/`: the daemon's client id, or its group's name (`AgentConfiguration.apiName`).
    let prefix: String
    let stream: AsyncStream<MQTTMessage>
    private let continuation: AsyncStream<MQTTMessage>.Continuation
    let counters: IntegrationCounters
    static let limit = 1024
    /// Whether this instance answers (a standby of a group holds the requests instead).
    private let standing: Standing
    /// In a group: where answers go, heard so that a standby knows which requests the active answered.
    private let replyPrefix: String?
    /// A standby's requests not (yet) answered by the active one, by reply topic and id, oldest first: the ones
    /// still fresh when it takes over are answered then.
    private let held = Mutex<[(key: String, message: MQTTMessage, arrived: ContinuousClock.Instant)]>([])
    /// How long a held request stays worth answering (its caller waits about that long).
    private let holdFor: Duration

    init(name: String, counters: IntegrationCounters, standing: Standing = Standing(group: nil, instance: ""),
         replyPrefix: String? = nil, holdFor: Duration = .seconds(15)) {
        prefix = "thing-agent/api/\(name)/request/"
        (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.limit))
        self.counters = counters
        self.standing = standing
        self.replyPrefix = standing.group == nil ? nil : replyPrefix
        self.holdFor = holdFor
    }

    /// The subscriptions that bring the requests (and in a group, the answers the active one sends).
    var filters: [String] { [prefix + "+"] + (replyPrefix.map { [$0 + "#"] } ?? []) }

    /// Called on the receive path for topics outside the device tree: takes API requests, refuses anything else.
    func accept(_ message: MQTTMessage) -> Bool {
        if message.topic.hasPrefix(prefix) {
            if standing.isActive {
                enqueue(message)
            } else {
                hold(message)
            }
            return true
        }
        guard let replyPrefix, message.topic.hasPrefix(replyPrefix) else { return false }
        if !standing.isActive, let key = Self.key(message.topic, message.payload) {
            held.withLock { held in held.removeAll { $0.key == key } }
        }
        return true
    }

    private func enqueue(_ message: MQTTMessage) {
        if case .dropped = continuation.yield(message) {
            counters.requestsDropped.add(1, ordering: .relaxed)
        }
    }

    /// A request and its answer meet by reply topic and id.
    private static func key(_ replyTo: String, _ payload: [UInt8]) -> String? {
        guard payload.count <= PayloadDecoder.maxPayloadBytes,
              let id = (try? JSONParser.parse(payload, maxDepth: PayloadDecoder.maxDepth))?["id"], !id.isNull else { return nil }
        return replyTo + "\u{0}" + id.serialized()
    }

    private func hold(_ message: MQTTMessage) {
        guard !message.retain else { return }
        let replyTo = message.responseTopic
            ?? (try? JSONParser.parse(message.payload, maxDepth: PayloadDecoder.maxDepth))?["replyTo"]?.stringValue
        guard let replyTo, let key = Self.key(replyTo, message.payload) else { return }
        held.withLock { held in
            let now = ContinuousClock.now
            held.removeAll { now - $0.arrived > holdFor }
            if held.count >= Self.limit { held.removeFirst() }
            held.append((key, message, now))
        }
    }

    /// This instance took over: the requests it held that the active one did not answer and that are still fresh
    /// are answered now (a request the lost instance had run but not answered runs again).
    func release() -> Int {
        let now = ContinuousClock.now
        let fresh = held.withLock { held in
            defer { held.removeAll() }
            return held.filter { now - $0.arrived <= holdFor }.map(\.message)
        }
        fresh.forEach(enqueue)
        return fresh.count
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
    /// For a 429: the seconds until the budget has room again, answered as `retryAfter`.
    var retryAfter: Double?

    init(_ code: Int, _ message: String, error: JSONObject? = nil, retryAfter: Double? = nil) {
        self.code = code
        self.message = message
        self.error = error
        self.retryAfter = retryAfter
    }
}

extension Agent {
    /// The methods the API answers, in the order the docs list them.
    public static var apiMethods: [String] { AgentAPI.methods.map(\.name) }
}

/// The API at work: takes requests from its queue, checks them (retained, size, reply topic, rate limits), runs
/// the method's handler and publishes the answer. One of the daemon's parts, run by `Agent.run` for as long as it
/// runs; it holds what it needs: the agent whose methods the handlers call, the queue, and its limiters.
struct AgentAPI: Sendable {
    /// A request to one method: its JSON object, and the agent that answers it.
    struct Call: Sendable {
        let agent: Agent
        let request: JSONObject

        /// `device`: a device id (400 when missing or not an id).
        func device() throws -> String {
            guard let id = request["device"]?.stringValue else { throw APIError(400, "'device' is missing") }
            guard DeviceID.isValid(id) else { throw APIError(400, "'\(id)' is not a device id") }
            return id
        }

        /// `device`, which the cache must know (404 otherwise).
        func known() throws -> (String, DeviceSnapshot) {
            let id = try device()
            guard let snapshot = agent.cache.device(id) else { throw APIError(404, "unknown device '\(id)'") }
            return (id, snapshot)
        }
    }

    /// A method: whether it waits for devices or the broker (then it runs beside the loop, so that a slow device
    /// never holds up an `info`), and what answers it: the answer's `data` and fields beside it.
    struct Method: Sendable {
        let name: String
        let waits: Bool
        let answer: @Sendable (Call) async throws -> (JSONValue, JSONObject)

        init(_ name: String, waits: Bool = false, _ answer: @escaping @Sendable (Call) async throws -> (JSONValue, JSONObject)) {
            self.name = name
            self.waits = waits
            self.answer = answer
        }

        /// A method answered by `data` alone.
        init(_ name: String, waits: Bool = false, data: @escaping @Sendable (Call) async throws -> JSONValue) {
            self.init(name, waits: waits) { (try await data($0), [:]) }
        }
    }

    /// Every method, with its handler.
    static let methods: [Method] = [
        Method("info") { call in
            let (id, snapshot) = try call.known()
            return .object(snapshot.json(now: Timestamp.now(), metadata: try? call.agent.local?.metadata(id)))
        },
        Method("devices") { call in try call.agent.devicesPage(call.request, now: Timestamp.now()) },
        Method("set", waits: true) { call in
            let id = try call.device()
            guard let data = call.request["data"]?.objectValue, !data.isEmpty else {
                throw APIError(400, "'data' must be a non-empty object of property codes and values")
            }
            let timeout = try call.agent.apiTimeout(call.request["timeout"])
            var values: [String: JSONValue] = [:]
            for (code, value) in data { values[code] = value }
            let outcome = await call.agent.sendPropertySet(deviceId: id, values, timeout: timeout,
                                                           force: call.request["force"]?.boolValue ?? false)
            return .object(outcome.apiJSON)
        },
        Method("action", waits: true) { call in
            let id = try call.device()
            guard let name = call.request["name"]?.stringValue else { throw APIError(400, "'name' is missing or not a string") }
            let params = call.request["params"].map { $0.isNull ? JSONValue.object([:]) : $0 } ?? .object([:])
            guard let input = params.objectValue else { throw APIError(400, "'params' must be an object") }
            let timeout = try call.agent.apiTimeout(call.request["timeout"])
            let outcome = await call.agent.invokeAction(deviceId: id, name: name, params: input, timeout: timeout,
                                                        force: call.request["force"]?.boolValue ?? false)
            return .object(outcome.apiJSON)
        },
        Method("edit", data: { try await $0.agent.apiLocalChange("edit", $0.request) }),
        Method("group", data: { try await $0.agent.apiLocalChange("group", $0.request) }),
        Method("network", data: { try await $0.agent.apiLocalChange("network", $0.request) }),
        Method("remove", waits: true) { call in
            let (id, _) = try call.known()
            do {
                return .object(try await call.agent.removeDevice(id).json)
            } catch let error as EditError {
                throw APIError(404, error.description)
            } catch {
                throw APIError(503, "\(error)")
            }
        },
        Method("detail", waits: true) { call in try await call.agent.apiDetail(try call.known().0, call.request) },
        Method("health", data: { .object($0.agent.health().json) }),
        Method("firmware", data: { try $0.agent.apiFirmware($0.request) }),
        Method("ota", waits: true) { call in
            let (id, snapshot) = try call.known()
            return try await call.agent.apiOTA(call.request, device: id, snapshot: snapshot)
        },
        Method("fetch", waits: true, data: { try await $0.agent.apiDeviceRequest("fetch", $0.request, device: try $0.device()) }),
        Method("wifiScan", waits: true, data: {
            try await $0.agent.apiDeviceRequest("wifiScan", $0.request, device: try $0.device())
        }),
        Method("gateways", data: { try await $0.agent.apiDeviceRequest("gateways", $0.request, device: try $0.device()) }),
        Method("transfer", waits: true, data: {
            try await $0.agent.apiDeviceRequest("transfer", $0.request, device: try $0.device())
        }),
        Method("scenes", data: { try await $0.agent.apiLocalChange("scenes", $0.request) }),
        Method("links", data: { try await $0.agent.apiLocalChange("links", $0.request) }),
        Method("groupSet", waits: true, data: { try await $0.agent.apiGroupSet($0.request) }),
        Method("pair", waits: true, data: { try await $0.agent.apiPairing("pair", $0.request) }),
        Method("pairRevoke", waits: true, data: { try await $0.agent.apiPairing("pairRevoke", $0.request) }),
        Method("pairings", data: { try await $0.agent.apiPairing("pairings", $0.request) }),
        // The listings alone, on topics of their own: an ACL can let a service read scenes and links without
        // letting it change them (`scenes` and `links` also create and delete).
        Method("sceneList", data: { try $0.agent.listLocal("scenes") ?? .null }),
        Method("linkList", data: { try $0.agent.listLocal("links") ?? .null }),
    ]

    /// The methods that only read: those a read-only service may call (`AccessPolicy.readMethods`, as the shipped
    /// ACL), and `detail`. They share one total budget, and the methods that change or ask devices another.
    static let reads = Set(AccessPolicy.readMethods + ["detail"])

    static let byName: [String: Method] = Dictionary(uniqueKeysWithValues: methods.map { ($0.name, $0) })

    let agent: Agent
    let queue: APIQueue
    /// The per-client request budget (`apiRateLimit`), and the budgets of all clients together
    /// (`apiRateLimitTotal`), one for reads and one for changes.
    let perClient: APIRateLimiter
    let totalReads: APIRateLimiter
    let totalChanges: APIRateLimiter
    /// Recent requests and their answers, so that a copy of a request is not run again.
    let answers = APIAnswerMemory()
    /// The rate of the API's warnings.
    let logLimiter = LogRateLimiter()

    init(agent: Agent, queue: APIQueue) {
        self.agent = agent
        self.queue = queue
        perClient = APIRateLimiter(rate: agent.configuration.api.rateLimit)
        totalReads = APIRateLimiter(rate: agent.configuration.api.rateLimitTotal)
        totalChanges = APIRateLimiter(rate: agent.configuration.api.rateLimitTotal)
    }

    /// Answers requests until the queue ends or the task is cancelled.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await message in queue.stream {
                let name = String(message.topic.dropFirst(queue.prefix.count))
                if Self.byName[name]?.waits == true {
                    group.addTask { await answer(message, method: name) }
                } else {
                    await answer(message, method: name)
                }
            }
            group.cancelAll()
        }
    }

    private func answer(_ message: MQTTMessage, method: String) async {
        let counters = queue.counters
        let logger = agent.logger, configuration = agent.configuration
        // A request is an act of the moment: the broker replays a retained one at every subscribe, so running it
        // would repeat a `remove` or a forced `set` at every start.
        if message.retain {
            counters.requestsDropped.add(1, ordering: .relaxed)
            agent.ingestor.counters.countGuard(.apiRetainedRefused)
            if logLimiter.shouldLog("retained", now: Timestamp.now()) {
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
        guard let requester = ReplyTopics.client(of: replyTo, prefix: configuration.api.replyPrefix) else {
            counters.requestsDropped.add(1, ordering: .relaxed)
            agent.ingestor.counters.countGuard(.apiReplyRefused)
            if logLimiter.shouldLog("reply", now: Timestamp.now()) {
                logger.warning("refused an API request: its reply topic is outside the reply prefix", metadata: [
                    "topic": message.topic, "replyTo": String(replyTo.prefix(200)),
                    "replyPrefix": configuration.api.replyPrefix])
            }
            return
        }
        var reply = JSONObject([("id", request?["id"] ?? .null), ("method", .string(method))])
        // A request that comes again (QoS 1 redelivers after a lost PUBACK) is run once; its copies get its answer.
        let memoryKey = request?["id"].flatMap { $0.isNull ? nil : APIAnswerMemory.key(client: requester, id: $0.serialized()) }
        if let memoryKey {
            switch answers.claim(memoryKey, now: ContinuousClock.now) {
            case .run: break
            case .running:
                agent.ingestor.counters.countGuard(.apiRepeated)
                return
            case .answered(let bytes):
                agent.ingestor.counters.countGuard(.apiRepeated)
                await send(bytes, to: replyTo, correlationData: message.correlationData)
                return
            }
        }
        do {
            try checkRate(requester, reads: Self.reads.contains(method))
            if oversized { throw APIError(400, "the request is over 256 KiB") }
            guard let request else { throw APIError(400, "the request is not a JSON object") }
            guard let handler = Self.byName[method] else {
                throw APIError(404, "unknown method '\(method)'; methods: \(Agent.apiMethods.joined(separator: ", "))")
            }
            // The device requests the call makes count against this client's share of the requests in flight.
            let (data, extra) = try await RequestOwner.$current.withValue(requester) {
                try await handler.answer(Call(agent: agent, request: request))
            }
            reply["code"] = .integer(0)
            reply["data"] = data
            for (key, value) in extra { reply[key] = value }
            counters.requestsAnswered.add(1, ordering: .relaxed)
        } catch {
            let failure = error as? APIError ?? APIError(500, "\(error)")
            reply["code"] = .integer(Int64(failure.code))
            reply["message"] = .string(failure.message)
            if let error = failure.error { reply["error"] = .object(error) }
            if let retryAfter = failure.retryAfter {
                reply["retryAfter"] = .double(retryAfter)
                // Not run: sending it again (after retryAfter) runs it.
                if let memoryKey { answers.release(memoryKey) }
            }
            counters.requestsRejected.add(1, ordering: .relaxed)
        }
        let bytes = JSONValue.object(reply).serializedBytes()
        if let memoryKey, reply["retryAfter"] == nil { answers.remember(memoryKey, answer: bytes) }
        await send(bytes, to: replyTo, correlationData: message.correlationData)
    }

    /// Takes a token from the client's budget and from the total one of its kind (reads and changes have one
    /// each, so that a busy reader never spends an operator's share); throws 429 with `retryAfter` otherwise.
    private func checkRate(_ requester: String, reads: Bool) throws(APIError) {
        let configuration = agent.configuration
        if let wait = perClient.take(requester, now: ContinuousClock.now) {
            agent.ingestor.counters.countGuard(.apiRateLimited)
            throw APIError(429, "too many requests from '\(requester)': at most \(configuration.api.rateLimit) "
                + "per second; try again later", retryAfter: wait)
        }
        // Checked after the client's own budget, so that one busy client does not spend the others' share.
        if let wait = (reads ? totalReads : totalChanges).take("", now: ContinuousClock.now) {
            agent.ingestor.counters.countGuard(.apiRateLimited)
            throw APIError(429, "too many requests in all: at most \(configuration.api.rateLimitTotal) per "
                + "second from all clients together; try again later", retryAfter: wait)
        }
    }

    private func send(_ answer: [UInt8], to replyTo: String, correlationData: [UInt8]?) async {
        do {
            try await agent.client.publish(replyTo, payload: answer, qos: .atLeastOnce, correlationData: correlationData)
        } catch {
            agent.logger.warning("could not send an API answer", metadata: ["topic": replyTo, "error": "\(error)"])
        }
    }
}

extension Agent {
    /// `edit`, `group`, `network`, `scenes`, `links`: a `LocalChange` applied (or the `list` action answered).
    func apiLocalChange(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        let answer: JSONValue
        do {
            if request["action"]?.stringValue == "list", let listed = try listLocal(method) { return listed }
            guard let change = try LocalChange(method: method, request: request) else { throw APIError(404, method) }
            answer = try apply(change)
        } catch let error as EditError {
            throw APIError(error.apiCode, error.description)
        }
        // In a group the change is answered once the broker has it for the standbys: a takeover never loses it.
        guard await replicated() else {
            throw APIError(503, "the change is kept by \(standing.instance) but the broker did not take it for the "
                           + "group's standbys within \(InputBounds.text(seconds: configuration.requestTimeout.seconds)) s")
        }
        return answer
    }

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
        let timeout = try apiTimeout(request["timeout"])
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
        var limit = configuration.api.pageSize
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

    /// A device request's `timeout` from the API: as `timeout(_:)`, and at most `apiMaxTimeout`, so that no
    /// client can park requests for days and fill `maxInFlight` for good.
    func apiTimeout(_ value: JSONValue?) throws -> Duration? {
        let timeout = try Self.timeout(value)
        let limit = configuration.api.maxTimeout
        if let timeout, timeout > limit {
            throw APIError(400, "'timeout' \(InputBounds.text(seconds: timeout.seconds)) s is over this agent's longest, "
                           + "\(InputBounds.text(seconds: limit.seconds)) s (apiMaxTimeout)")
        }
        return timeout
    }
}
