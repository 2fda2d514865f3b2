import FoundationEssentials
import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// A light client for a process beside the daemon (the service `Agent` that holds the cache and is its only
/// writer): it reads the cache file read-only (`CacheReader`: no migration, no fleet load, no lock) and sends its
/// requests and changes to the daemon's API over MQTT (docs/mqtt-api.md, "The API over MQTT"), each with a timeout. The
/// daemon sends the device requests, tracks them and writes what their answers change; the client only reads.
///
/// `connect()` first; `disconnect()` when done. Failures of the daemon or the broker are `AgentClientError`;
/// a device request that ended badly throws (or, for sets, reports) the daemon's `RequestError`.
public final class AgentClient: Sendable {
    public let configuration: AgentConfiguration
    /// The daemon's client id: its API lives under `thing-agent/api/<daemon>/request/`.
    public let daemon: String
    /// The thing models that check property sets here, before anything is sent (`modelsDirectory`).
    public let models: ThingModels
    /// How much longer than a device request's own timeout an answer from the daemon is waited for.
    public static let answerSlack: Duration = .seconds(5)
    /// Where the daemon's answers come: `<replyPrefix><replyUser>/<client id>`.
    public let replyTopic: String
    private let client: MQTTClient
    private let routes = Routes()
    /// The event feeds' subscribes and unsubscribes, one at a time in the order asked, so that a follower's
    /// subscribe never lands before an unsubscribe asked earlier.
    private let subscriptions = SerialTasks()
    /// When this client's requests refused with 429 go again, one after another.
    private let pacer = RetryPacer()

    /// `daemon`: the daemon's client id, or its group's name (default `configuration.apiName`: the group's when
    /// `agentGroup` is set, else `clientId`). `replyUser`: the first level of the
    /// reply topic under `replyPrefix`, which the shipped ACL lets each user read under its own name (default
    /// `configuration.username`, else `client`). Throws for thing models that do not load or unusable broker
    /// settings; nothing is connected yet.
    public init(configuration: AgentConfiguration, daemon: String? = nil, replyUser: String? = nil) throws {
        self.configuration = configuration
        self.daemon = daemon ?? configuration.apiName
        models = try configuration.modelsDirectory.map { try ThingModels(directory: $0) } ?? ThingModels()
        let clientID = configuration.commandClientID
        replyTopic = "\(configuration.api.replyPrefix)\(replyUser ?? configuration.mqtt.username ?? "client")/\(clientID)"
        let routes = routes, replyTopic = replyTopic
        client = try MQTTClient(configuration: configuration.mqtt.connection(clientID: clientID), streamMessages: false,
                                onMessage: { message in routes.route(message, replyTopic: replyTopic) })
    }

    /// Connects to the broker and subscribes to the reply topic.
    ///
    /// At QoS 0: this client's session is clean, so an answer is lost with a broken connection at either QoS, and
    /// on a live one QoS 0 loses nothing. A QoS 1 subscription costs a NATS cluster a replicated JetStream consumer,
    /// which it may refuse for some seconds after a node died (docs/brokers.md); a QoS 0 one costs it nothing.
    public func connect() async throws(AgentClientError) {
        do {
            try await client.connect()
            try await client.subscribe(replyTopic, qos: .atMostOnce)
        } catch {
            await client.disconnect()
            throw .brokerUnavailable("\(error)")
        }
    }

    /// Disconnects; pending calls end with `noAnswer`, feeds end.
    public func disconnect() async {
        await client.disconnect()
        routes.finishAll()
    }

    // MARK: reads (the cache file, read-only)

    /// The cached device; nil when it is not cached (or there is no cache file yet).
    public func device(_ id: String) throws -> DeviceSnapshot? {
        try reader()?.device(id)
    }

    /// Every cached device, sorted by id.
    public func devices() throws -> [DeviceSnapshot] {
        try reader()?.devices() ?? []
    }

    /// The cached devices whose info names `gateway` as their gateway.
    public func cachedSubDevices(of gateway: String) throws -> [DeviceSnapshot] {
        try reader()?.subDevices(of: gateway) ?? []
    }

    /// The gateways `gateway` can replace, as `GatewayTransferManager.gateways()` lists them.
    public func gateways(replaceableBy gateway: String) throws -> [DeviceSnapshot] {
        guard let me = try device(gateway) else { return [] }
        return GatewayTransferManager.gateways(replaceableBy: me, among: try devices())
    }

    private func reader() throws -> CacheReader? {
        guard FileManager.default.fileExists(atPath: configuration.cache.database) else { return nil }
        return try CacheReader(path: configuration.cache.database)
    }

    // MARK: the API

    /// Sends `request` to `method` and returns the answer's `data` (a non-zero code throws `refused`). `timeout`: how long the daemon's answer is
    /// waited for (default `requestTimeout`).
    public func call(_ method: String, _ request: JSONObject = JSONObject(),
                     timeout: Duration? = nil) async throws(AgentClientError) -> JSONValue {
        try await answer(method, request, timeout: timeout ?? configuration.requestTimeout)["data"] ?? .null
    }

    /// The whole answer (code 0) to one request. A 429 (the daemon's rate limit) is not the end: the request is
    /// sent again once the daemon's `retryAfter` has passed, paced with this client's other retries, for as long
    /// as `timeout` allows; only then is the 429 thrown.
    private func answer(_ method: String, _ request: JSONObject, timeout: Duration) async throws(AgentClientError)
        -> JSONObject {
        let deadline = ContinuousClock.now + timeout
        while true {
            let answer = try await send(method, request, until: deadline, timeout: timeout)
            let code = Int(answer["code"]?.int64Value ?? -1)
            if code == 0 { return answer }
            if code == 429, let retryAfter = answer["retryAfter"]?.doubleValue,
               let slot = pacer.slot(after: retryAfter), slot < deadline {
                do {
                    try await Task.sleep(until: slot)
                    continue
                } catch {}
            }
            throw .refused(code: code, message: answer["message"]?.stringValue ?? "refused with code \(code)",
                           error: RequestError(json: answer["error"]))
        }
    }

    /// Sends one request and waits for its answer until `deadline`.
    private func send(_ method: String, _ request: JSONObject, until deadline: ContinuousClock.Instant,
                      timeout: Duration) async throws(AgentClientError) -> JSONObject {
        let id = "c-\(UInt64.random(in: 0...UInt64.max))"
        let answers = routes.expect(id)
        defer { routes.forget(id) }
        var payload = request
        payload["id"] = .string(id)
        payload["replyTo"] = .string(replyTopic)
        do {
            try await client.publish("thing-agent/api/\(daemon)/request/\(method)",
                                     payload: JSONValue.object(payload).serializedBytes(), qos: .atLeastOnce,
                                     responseTopic: replyTopic)
        } catch {
            throw .brokerUnavailable("\(error)")
        }
        let answer = await withTimeout(max(.zero, deadline - ContinuousClock.now)) { () async -> JSONObject? in
            for await answer in answers { return answer }
            return nil
        }
        guard let answer else { throw .noAnswer(method: method, seconds: timeout.seconds) }
        return answer
    }

    /// A device request's wait for the daemon: its own timeout and some slack, so that the daemon's timeout
    /// answer comes first.
    private func requestWait(_ timeout: Duration?) -> Duration {
        (timeout ?? configuration.requestTimeout) + Self.answerSlack
    }

    private static func request(_ pairs: [(String, JSONValue?)]) -> JSONObject {
        JSONObject(pairs.compactMap { key, value in value.map { (key, $0) } })
    }

    private static func seconds(_ timeout: Duration?) -> JSONValue? {
        timeout.map { .double($0.seconds) }
    }

    /// `call` for a device request: a refusal that carries the request's error throws that `RequestError`.
    private func deviceCall(_ method: String, _ request: JSONObject, timeout: Duration?) async throws -> JSONValue {
        do {
            return try await call(method, request, timeout: requestWait(timeout))
        } catch AgentClientError.refused(_, _, let error?) {
            throw error
        }
    }

    /// What `Agent.checkPropertySet` checks, against the cache file and `models`: nothing invalid is sent.
    public func checkPropertySet(deviceId: String, _ values: [String: JSONValue], force: Bool = false) throws(RequestError) {
        let device = DeviceID.isValid(deviceId) ? (try? self.device(deviceId)) ?? nil : nil
        try Agent.checkPropertySet(deviceId: deviceId, values, device: device, models: models, force: force)
    }

    /// Sets properties through the daemon (`set`) and reports how it ended; checked here first, so an invalid set
    /// or one to a device known to be offline ends without reaching the broker. Throws only for the daemon.
    public func sendPropertySet(deviceId: String, _ values: [String: JSONValue], timeout: Duration? = nil,
                                force: Bool = false) async throws(AgentClientError) -> RequestOutcome {
        do {
            try checkPropertySet(deviceId: deviceId, values, force: force)
        } catch {
            return RequestOutcome(deviceId: deviceId, kind: .setProperties, msgId: nil, result: .failure(error),
                                  elapsed: .zero)
        }
        let data = try await call("set", Self.request([
            ("device", .string(deviceId)), ("data", .object(JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))),
            ("timeout", Self.seconds(timeout)), ("force", .bool(force)),
        ]), timeout: requestWait(timeout))
        guard let outcome = RequestOutcome(apiJSON: data) else {
            throw .refused(code: 500, message: "the daemon's answer to set is not an outcome", error: nil)
        }
        return outcome
    }

    /// Invokes an action of the device through the daemon (`action`); the outcome carries its output parameters.
    public func invokeAction(deviceId: String, name: String, params: JSONObject = [:], timeout: Duration? = nil,
                             force: Bool = false) async throws(AgentClientError) -> RequestOutcome {
        let data = try await call("action", Self.request([
            ("device", .string(deviceId)), ("name", .string(name)), ("params", .object(params)),
            ("timeout", Self.seconds(timeout)), ("force", .bool(force)),
        ]), timeout: requestWait(timeout))
        guard let outcome = RequestOutcome(apiJSON: data) else {
            throw .refused(code: 500, message: "the daemon's answer to action is not an outcome", error: nil)
        }
        return outcome
    }

    /// Asks the device for fresh information through the daemon (`fetch`); returns the info it was merged into,
    /// as the daemon's answer gives it (no cache file needed), else from the file the daemon wrote before answering.
    public func fetchInfo(_ deviceId: String, timeout: Duration? = nil) async throws -> DeviceInfo {
        let answer = try await deviceCall("fetch", Self.request([
            ("device", .string(deviceId)), ("timeout", Self.seconds(timeout)),
        ]), timeout: timeout)
        if var snapshot = answer.objectValue, snapshot["devId"]?.stringValue == deviceId {
            // The answer's `name` is the local one where set; the device's own is `reportedName`.
            if let reported = snapshot["reportedName"] { snapshot["name"] = reported }
            return DeviceInfo(devId: deviceId, fields: snapshot)
        }
        guard let info = try device(deviceId)?.info else {
            throw AgentClientError.refused(code: 500, message: "the daemon's answer to fetch carried no device "
                                           + "information, and no cache file has \(deviceId)", error: nil)
        }
        return info
    }

    /// The Wi-Fi networks the device sees (`wifiScan`), as `Agent.scanWifiList` returns them.
    public func scanWifiList(_ deviceId: String, timeout: Duration? = nil, force: Bool = false) async throws
        -> [WifiNetwork] {
        let data = try await deviceCall("wifiScan", Self.request([
            ("device", .string(deviceId)), ("timeout", Self.seconds(timeout)), ("force", .bool(force)),
        ]), timeout: timeout)
        return (data.arrayValue ?? []).compactMap(WifiNetwork.init(json:))
    }

    /// Starts `gateway`'s takeover of the faulty gateway `faulty` (`transfer`): the daemon checks it as
    /// `GatewayTransferManager.transfer(fromGateway:)` does, records the start, and from then on follows the
    /// progress and ends a stalled transfer itself. Follow it with `transferUpdates(gateway:)`, opened first.
    public func transfer(gateway: String, fromGateway faulty: String, timeout: Duration? = nil) async throws
        -> TransferStart {
        let data = try await deviceCall("transfer", Self.request([
            ("device", .string(gateway)), ("from", .string(faulty)), ("timeout", Self.seconds(timeout)),
        ]), timeout: timeout)
        guard let info = TransferInfo(json: data["transfer"], updatedAt: data["transfer"]?["updatedAt"]?.int64Value ?? 0)
        else { throw AgentClientError.refused(code: 500, message: "the daemon's answer to transfer is not one", error: nil) }
        // Checked before the conversion to milliseconds, which traps on a number as large as 1e300.
        guard let stallSeconds = InputBounds.seconds(data["stallTimeout"]?.doubleValue ?? 0, allowZero: true) else {
            throw AgentClientError.refused(code: 500, message: "the daemon's answer to transfer has a stallTimeout "
                                           + "that is not a number of seconds from 0 to \(Int(InputBounds.maxSeconds))",
                                           error: nil)
        }
        return TransferStart(info: info, moving: (data["moving"]?.arrayValue ?? []).compactMap(\.stringValue),
                             stallTimeout: .milliseconds(Int64((stallSeconds * 1000).rounded())))
    }

    /// Every change of `gateway`'s transfer as the daemon applies it (its event feed, `eventsTopic`), from the
    /// moment this returns; a stall the daemon ends comes as `failed` with failedCode `timeout`. The stream ends
    /// when the consuming task is cancelled or the client disconnects. Several streams may follow one gateway at
    /// once, each getting every change; the client unsubscribes from the gateway's feed when the last one ends.
    public func transferUpdates(gateway: String) async throws(AgentClientError) -> AsyncStream<TransferInfo> {
        try await follow(["\(configuration.events.topic)/\(gateway)/transfer"]) { message in
            guard let event = try? JSONParser.parse(message.payload) else { return nil }
            return TransferInfo(json: event["data"], updatedAt: event["time"]?.int64Value ?? 0)
        }
    }

    /// What `decode` makes of every message on `topics`, from the moment this returns (the subscriptions are
    /// acknowledged) until the consuming task is cancelled or the client disconnects. Each topic is subscribed
    /// while any stream follows it and unsubscribed when the last one ends.
    func follow<Element: Sendable>(_ topics: [String], decode: @escaping @Sendable (MQTTMessage) -> Element?)
        async throws(AgentClientError) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream()
        let (routes, client, subscriptions) = (self.routes, self.client, self.subscriptions)
        let tokens = topics.map { topic in
            routes.feed(topic) { message in
                if let element = decode(message) { continuation.yield(element) }
            } finish: {
                continuation.finish()
            }
        }
        continuation.onTermination = { _ in
            for (topic, token) in zip(topics, tokens) {
                guard routes.unfeed(topic, token) else { continue }
                // In line with the subscribes, and decided when its turn comes: a follower that started meanwhile
                // keeps the subscription.
                subscriptions.enqueue {
                    guard !routes.isFed(topic) else { return }
                    try? await client.unsubscribe(topic)
                }
            }
        }
        let subscribing = subscriptions.enqueue { () async -> MQTTError? in
            do throws(MQTTError) {
                try await client.subscribe(topics.map { ($0, QoS.atLeastOnce) })
                return nil
            } catch {
                return error
            }
        }
        if let failure = await subscribing.value {
            continuation.finish()
            throw .brokerUnavailable("\(failure)")
        }
        return stream
    }

    /// Runs a scene as `SceneRunner` does, each action a `set` through the daemon; an action the daemon did not
    /// answer ends as not sent.
    public func runScene(_ scene: Scene, timeout: Duration? = nil, force: Bool = false) async -> SceneReport {
        await SceneRunner { deviceId, values, timeout, force in
            do {
                return try await self.sendPropertySet(deviceId: deviceId, values, timeout: timeout, force: force)
            } catch {
                return RequestOutcome(deviceId: deviceId, kind: .setProperties, msgId: nil,
                                      result: .failure(.notSent(reason: "\(error)")), elapsed: .zero)
            }
        }.run(scene, timeout: timeout, force: force)
    }

    /// The device's detail page as the daemon composes it (`detail`): laid out by `layout` (a deviceDetailConfig
    /// object; nil: the daemon's own), its live network check waiting at most `timeout`.
    public func detail(_ deviceId: String, layout: JSONValue? = nil, timeout: Duration? = nil) async throws
        -> DeviceDetail {
        let data = try await call("detail", Self.request([
            ("device", .string(deviceId)), ("config", layout), ("timeout", Self.seconds(timeout)),
        ]), timeout: requestWait(timeout))
        guard let detail = DeviceDetail(json: data) else {
            throw AgentClientError.refused(code: 500, message: "the daemon's answer to detail is not a page", error: nil)
        }
        return detail
    }

    /// The ids of the devices the daemon holds as `gateway`'s sub-devices (`devices` with `gateway`, every page).
    public func subDevices(of gateway: String) async throws(AgentClientError) -> [String] {
        var ids: [String] = []
        var after: JSONValue = .null
        repeat {
            let (data, next) = try await page(JSONObject([("gateway", .string(gateway)), ("after", after)]))
            ids += (data.arrayValue ?? []).compactMap { $0["devId"]?.stringValue }
            after = next
        } while !after.isNull
        return ids
    }

    /// One page of `devices`: its data and `next`.
    private func page(_ request: JSONObject) async throws(AgentClientError) -> (JSONValue, JSONValue) {
        let answer = try await answer("devices", request, timeout: configuration.requestTimeout)
        return (answer["data"] ?? .null, answer["next"] ?? .null)
    }

    /// The daemon's `info` answer for a device: its cached snapshot as the API shows it.
    public func info(_ deviceId: String) async throws(AgentClientError) -> JSONObject {
        try await call("info", JSONObject([("device", .string(deviceId))])).objectValue ?? JSONObject()
    }

    /// Applies a change to the local tables through the daemon (`edit`, `group`, `network`) and returns what it made.
    public func apply(_ change: LocalChange, timeout: Duration? = nil) async throws(AgentClientError) -> JSONValue {
        try await call(change.method, change.request, timeout: timeout)
    }
}

/// What the daemon said when it started a gateway transfer.
public struct TransferStart: Sendable, Equatable {
    /// The transfer as recorded at the start (status `unknown` until the gateway's first report).
    public var info: TransferInfo
    /// The sub-devices of the faulty gateway when the transfer started.
    public var moving: [String]
    /// How long the daemon lets the transfer go without progress before it ends it as failed.
    public var stallTimeout: Duration

    public init(info: TransferInfo, moving: [String], stallTimeout: Duration) {
        self.info = info
        self.moving = moving
        self.stallTimeout = stallTimeout
    }
}

/// Why a call to the daemon's API did not give an answer's data.
public enum AgentClientError: Error, Sendable, CustomStringConvertible {
    /// The broker could not be used (connect, subscribe or publish failed).
    case brokerUnavailable(String)
    /// The daemon did not answer within the time given.
    case noAnswer(method: String, seconds: Double)
    /// The daemon answered with a non-zero code (400 bad request, 404 unknown device or method, 409 conflict,
    /// 429 too many requests, 502 the device request failed, with its error, 503 cannot do it now).
    case refused(code: Int, message: String, error: RequestError?)

    /// What went wrong, without the case's own words (the broker's error, the daemon's message).
    public var reason: String {
        switch self {
        case .brokerUnavailable(let reason): reason
        case .noAnswer: description
        case .refused(_, let message, _): message
        }
    }

    public var description: String {
        switch self {
        case .brokerUnavailable(let reason): "the broker cannot be used: \(reason)"
        case .noAnswer(let method, let seconds): "no answer from the daemon to \(method) within \(seconds) s"
        case .refused(let code, let message, _): "refused with code \(code): \(message)"
        }
    }
}

/// Where the client's messages go: answers by request id, event feeds by topic (each topic any number of feeds,
/// each by a token of its own). Called on the network thread.
private final class Routes: Sendable {
    private struct Feed {
        let token: UInt64
        let deliver: @Sendable (MQTTMessage) -> Void
        let finish: @Sendable () -> Void
    }
    private struct State {
        var answers: [String: AsyncStream<JSONObject>.Continuation] = [:]
        var feeds: [String: [Feed]] = [:]
        var nextToken: UInt64 = 0
    }
    private let state = Mutex(State())

    func route(_ message: MQTTMessage, replyTopic: String) {
        if message.topic == replyTopic {
            guard let answer = (try? JSONParser.parse(message.payload))?.objectValue,
                  let id = answer["id"]?.stringValue else { return }
            state.withLock { $0.answers[id] }?.yield(answer)
        } else {
            for feed in state.withLock({ $0.feeds[message.topic] ?? [] }) { feed.deliver(message) }
        }
    }

    func expect(_ id: String) -> AsyncStream<JSONObject> {
        let (stream, continuation) = AsyncStream<JSONObject>.makeStream(bufferingPolicy: .bufferingNewest(1))
        state.withLock { $0.answers[id] = continuation }
        return stream
    }

    func forget(_ id: String) {
        state.withLock { $0.answers.removeValue(forKey: id) }?.finish()
    }

    /// Adds a feed of `topic`; its token takes it out again.
    func feed(_ topic: String, deliver: @escaping @Sendable (MQTTMessage) -> Void,
              finish: @escaping @Sendable () -> Void) -> UInt64 {
        state.withLock { state in
            state.nextToken += 1
            state.feeds[topic, default: []].append(Feed(token: state.nextToken, deliver: deliver, finish: finish))
            return state.nextToken
        }
    }

    /// Takes that feed out; true when it was the topic's last.
    func unfeed(_ topic: String, _ token: UInt64) -> Bool {
        state.withLock { state in
            guard var feeds = state.feeds[topic], let index = feeds.firstIndex(where: { $0.token == token }) else {
                return false
            }
            feeds.remove(at: index)
            state.feeds[topic] = feeds.isEmpty ? nil : feeds
            return feeds.isEmpty
        }
    }

    func isFed(_ topic: String) -> Bool {
        state.withLock { $0.feeds[topic] != nil }
    }

    func finishAll() {
        let (answers, feeds) = state.withLock { state in
            defer { state = State(nextToken: state.nextToken) }
            return (Array(state.answers.values), state.feeds.values.flatMap { $0 })
        }
        for answer in answers { answer.finish() }
        for feed in feeds { feed.finish() }
    }
}

/// Async work run one piece at a time, in the order it was asked for.
private final class SerialTasks: Sendable {
    private let last = Mutex<Task<Void, Never>?>(nil)

    @discardableResult
    func enqueue<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> Task<T, Never> {
        last.withLock { last in
            let previous = last
            let next = Task {
                await previous?.value
                return await work()
            }
            last = Task { _ = await next.value }
            return next
        }
    }
}

/// Spaces the retries of requests the daemon refused with 429: each goes no earlier than the daemon's
/// `retryAfter`, and no earlier than one interval after the retry before it, so that forty refused requests of one
/// scene come back as a steady stream the daemon's budget admits, not as forty at once again.
final class RetryPacer: Sendable {
    private let next = Mutex<ContinuousClock.Instant?>(nil)

    /// The instant to send again after a 429 with `retryAfter` seconds; nil when `retryAfter` is not a sane
    /// number of seconds.
    func slot(after retryAfter: Double) -> ContinuousClock.Instant? {
        guard retryAfter.isFinite, retryAfter >= 0, retryAfter <= 3600 else { return nil }
        let now = ContinuousClock.now
        // The interval between retries: what the daemon said one token takes, bounded to a sane range.
        let interval = Duration.milliseconds(Int64(min(max(retryAfter, 0.005), 1) * 1000))
        return next.withLock { next in
            let slot = max(now + .milliseconds(Int64(retryAfter * 1000)), next ?? now)
            next = slot + interval
            return slot
        }
    }
}
