import FoundationEssentials
import HTTPEndpoint
import JSON
import MQTT
import Platform
import Synchronization
import ThingAgentCore

/// The service: keeps the device cache current from the broker, tells listeners what changed, and sends requests.
///
/// `init` opens the cache and loads it, so `cache` answers before the broker is even reached. `run()` connects,
/// subscribes and works until its task is cancelled, then stops gracefully: it owns ingest, journal, flusher,
/// timers and the API, as a swift-service-lifecycle `Service` owns its work.
///
/// Within the package the same type also runs as a stand-in for the daemon and as an observer (`Role`); a library
/// user sees the daemon's role alone, and `AgentClient` beside it.
public final class Agent: Sendable {
    /// What an agent is for. Each part of the agent asks its role one of two questions, `writesCache` and
    /// `speaksForTheFleet`, so that what each role does reads in one place (here) rather than in conditions spread
    /// through the code.
    package enum Role: Sendable {
        /// The cache's writer and the fleet's voice: keeps the cache, announces itself, serves the API, provisions,
        /// propagates links, publishes its counters. `thing-agent run` and an embedded agent.
        case daemon
        /// A daemon's work done by a short-lived command while no daemon runs: it keeps the cache as the daemon
        /// would (journal, SQLite, local tables, timers), but neither announces itself nor serves the API, uses a
        /// client id of its own with a clean session, leaves the daemon's counters in the file, and logs its start
        /// and stop quietly.
        case standIn
        /// Follows every device topic into a memory-only copy of the cache; writes nothing (`thing-agent watch`).
        case observer

        /// Journals, writes SQLite and the local tables, keeps the watches and timers: the daemon and its stand-in.
        package var writesCache: Bool { self != .observer }
        /// Announces itself, serves the API, provisions, propagates links, imports the scenes file and publishes
        /// its counters: the daemon alone.
        package var speaksForTheFleet: Bool { self == .daemon }
    }

    public let configuration: AgentConfiguration
    package let role: Role
    package var isStandIn: Bool { role == .standIn }
    public let cache: DeviceCache
    public let events: EventHub
    public let logger: AgentLogger
    /// The thing models that check property sets, loaded from `modelsDirectory` at init (and at `reload()`).
    public var models: ThingModels { reloadable.withLock { $0.models } }
    /// What `reload()` replaces: read at init, swapped whole on a reload.
    let reloadable: Mutex<ReloadableSettings>
    /// `reloadable`'s models, shared with the writer and the link engine (a replacement re-checks moved link members).
    let currentModels: CurrentModels
    let topics: Topics
    /// The wire dialects spoken (config `dialects`): what is subscribed, parsed, and how requests go out.
    let dialects: Dialects
    let writer: CacheWriter
    let tracker: RequestTracker
    let ingestor: Ingestor
    let offlineWatch: OfflineWatch
    let transferWatch: TransferWatch
    let otaWatch: OTAWatch
    /// The multi-control links at work (the daemon's; idle in the CLI's roles).
    let linkEngine: LinkEngine
    let flusher: CacheFlusher
    let client: MQTTClient
    /// Connects, losses and reconnects, logged and counted.
    let connectionLog: ConnectionLog
    /// Open while connected and subscribed: what `waitUntilConnected` waits for.
    private let readiness = ReadinessGate()
    /// Requests sent to devices, by kind and outcome, and their durations (the metrics).
    let requestMetrics = RequestMetrics()
    /// Local metadata, groups, backup networks (its own SQLite connection); nil for a `watch` without a cache file.
    package let local: LocalStore?
    /// The API's request queue; nil unless the daemon serves the API.
    let apiQueue: APIQueue?
    /// Events published and API requests served.
    public let integration: IntegrationCounters
    /// Held for the agent's lifetime when made with `lockCache` (the daemon): one daemon per cache file.
    let cacheLock: CacheLock?
    /// The device-detail layout (`detailConfig`, or the built-in one).
    public var detailConfig: DetailConfig { reloadable.withLock { $0.detailConfig } }
    /// Pairings, activations and broker access; nil unless the daemon runs with `provisioning` on.
    let provisioning: Provisioning?
    /// Whether this instance acts for the fleet now: always, unless it is a daemon of a group (`agentGroup`)
    /// standing by. Every acting part asks it.
    public let standing: Standing
    /// The group's lease and the records that carry the active instance's writes to the standbys; nil without
    /// `agentGroup` (and for the CLI's roles).
    let lease: GroupLease?
    let replica: GroupReplica?
    /// Home Assistant's discovery, states and commands: the daemon's (with `homeAssistant` off it only takes
    /// back what an earlier run published); nil for the other roles.
    let homeAssistant: HomeAssistantPublisher?

    /// Opens the cache and loads the thing models (a file that is not a valid model is an error naming it).
    /// `lockCache` (on by default) takes `CacheLock` on the file before anything writes it, as the daemon does, and
    /// throws `CacheLock.Held` naming the holder when a daemon (or another agent) has it: two writers of one file
    /// would replay each other's journal. Held until `run()` ends (or the agent is released).
    /// `shouldStop` is asked while a big cache loads and the journal replays: true ends `init` with
    /// `StartUpInterrupted`, having written nothing (a SIGTERM during start-up).
    public convenience init(configuration: AgentConfiguration, logger: AgentLogger = .disabled, lockCache: Bool = true,
                            shouldStop: @escaping @Sendable () -> Bool = { false }) throws {
        try self.init(configuration: configuration, role: .daemon, logger: logger, lockCache: lockCache,
                      shouldStop: shouldStop)
    }

    /// How long a starting daemon waits for a CLI command that holds the cache's lock (a `transfer` with no
    /// daemon holds it up to its stall timeout, 120 s by default): under systemd's start timeout of the shipped
    /// unit (300 s), so that systemd does not kill the waiting daemon.
    static let commandLockWait: Duration = .seconds(240)

    /// The daemon, its stand-in or an observer.
    package init(configuration: AgentConfiguration, role: Role, logger: AgentLogger = .disabled,
                 lockCache: Bool = false, shouldStop: @escaping @Sendable () -> Bool = { false }) throws {
        try configuration.checkCombinations()
        self.configuration = configuration
        self.role = role
        self.logger = logger
        let settings = try ReloadableSettings(configuration, role: role)
        reloadable = Mutex(settings)
        topics = configuration.topics
        dialects = configuration.wire
        events = EventHub()
        let opened = try Self.openCache(configuration, role: role, logger: logger, lockCache: lockCache,
                                        shouldStop: shouldStop)
        (cacheLock, cache, local) = (opened.lock, opened.cache, opened.local)
        let upgrades = opened.upgrades
        currentModels = CurrentModels(settings.models)
        writer = try Self.makeWriter(configuration, role: role, store: opened.store, cache: cache, hub: events,
                                     models: currentModels, logger: logger)
        tracker = RequestTracker(limit: configuration.maxInFlight, ownerLimit: configuration.api.maxInFlightPerClient)
        integration = IntegrationCounters()
        let group = role.speaksForTheFleet ? configuration.group.name : nil
        let standing = Standing(group: group, instance: configuration.mqtt.clientID)
        self.standing = standing
        let lease = group.map { GroupLease(group: $0, instance: configuration.mqtt.clientID,
                                           timeout: configuration.group.failoverTimeout, standing: standing,
                                           logger: logger) }
        let replica = group.map { GroupReplica(group: $0, instance: configuration.mqtt.clientID, logger: logger) }
        (self.lease, self.replica) = (lease, replica)
        let apiQueue = role.speaksForTheFleet && configuration.api.enabled
            ? APIQueue(name: configuration.apiName, counters: integration, standing: standing,
                       replyPrefix: configuration.api.replyPrefix,
                       holdFor: configuration.requestTimeout + AgentClient.answerSlack) : nil
        // The daemon alone: a stand-in's removal leaves the broker credentials to the daemon's next start.
        let provisioning = role.speaksForTheFleet && configuration.provisioning.enabled
            ? try Self.makeProvisioning(configuration, cache: cache, logger: logger) : nil
        (self.apiQueue, self.provisioning) = (apiQueue, provisioning)
        let watches = try Self.makeWatches(configuration, role: role, cache: cache, local: local, upgrades: upgrades,
                                           writer: writer, hub: events, topics: topics, provisioning: provisioning,
                                           models: currentModels, reloadable: settings, standing: standing,
                                           replica: replica, logger: logger)
        (offlineWatch, transferWatch, otaWatch, linkEngine) = (watches.offline, watches.transfer, watches.ota,
                                                               watches.links)
        let homeAssistant = role.speaksForTheFleet && local != nil
            ? HomeAssistantPublisher(settings: configuration.homeAssistant, agentStatus: configuration.announceTopic,
                                     logger: logger) : nil
        self.homeAssistant = homeAssistant
        // It hears the writer's change feed, after the watches that decide anything.
        let commands = configuration.homeAssistant.enabled ? homeAssistant : nil
        if let commands { writer.watches.add(commands) }
        // Topics outside the device tree go to the API's queue, the activations' or Home Assistant's (nowhere for
        // the other roles).
        var elsewhere: (@Sendable (MQTTMessage) -> Bool)?
        if apiQueue != nil || provisioning != nil || lease != nil || commands != nil {
            elsewhere = { message in
                (apiQueue?.accept(message) ?? false) || (provisioning?.accept(message) ?? false)
                    || (lease?.accept(message) ?? false) || (replica?.accept(message) ?? false)
                    || (commands?.accept(message) ?? false)
            }
        }
        // The answers the dialects owe devices go out from the daemon alone (the native dialect owes none), and in a
        // group from the active instance alone.
        let replies = role.speaksForTheFleet && !dialects.others.isEmpty ? ReplySender(standing: standing) : nil
        let ingestor = Ingestor(dialects: dialects, writer: writer, tracker: tracker, logger: logger,
                                elsewhere: elsewhere, replies: replies, limits: IngestLimits(configuration))
        self.ingestor = ingestor
        let report = Self.counterReport(role: role, ingestor: ingestor)
        flusher = Self.makeFlusher(configuration, role: role, writer: writer, report: report, local: local,
                                   logger: logger)
        try Self.replayJournal(role: role, writer: writer, ingestor: ingestor, watches: watches, report: report,
                               logger: logger, shouldStop: shouldStop)
        let mqtt = Self.mqttConfiguration(configuration, daemon: role.speaksForTheFleet, standing: standing)
        let connectionLog = ConnectionLog(brokers: configuration.mqtt.brokers, autoVersion: mqtt.protocolVersion == .auto,
                                          clientID: mqtt.clientID, logger: logger, quiet: !role.speaksForTheFleet)
        self.connectionLog = connectionLog
        let readiness = readiness
        client = try MQTTClient(
            configuration: mqtt, streamMessages: false,
            onMessage: { message in ingestor.handle(message) },
            onReceiveTurnEnd: { ingestor.endTurn() },
            onStateChange: { state, error in
                connectionLog.changed(state, error)
                readiness.connection(up: state == .connected)
            })
        connectionLog.follow(client)
        // Weakly: the client's message handler holds the ingestor, which must not hold the client in turn.
        ingestor.onRefuse { [weak client] in client?.dropConnectionUncleanly() }
        replies?.use(client, agent: self)
    }

    /// Home Assistant's publisher: messages published, and whether the first pass over the fleet after the start is
    /// (the bench); nil unless the daemon runs with `homeAssistant` on.
    package var homeAssistantProgress: (published: Int, initialPassDone: Bool)? {
        guard configuration.homeAssistant.enabled, let homeAssistant else { return nil }
        return (homeAssistant.published.load(ordering: .relaxed), homeAssistant.initialPassDone.load(ordering: .relaxed))
    }

    /// Whether the daemon can keep what it receives: which of its files fail, and whether new messages are left
    /// with the broker meanwhile (docs/cache-file.md, "What survives what"). Always healthy for the CLI's roles.
    public var storage: StorageStatus { writer.storage.status }

    /// The journal's reserved size: `THING_AGENT_JOURNAL_SIZE` bytes (at least 64 KiB), else 16 MiB. It grows as
    /// needed and shrinks back to this size when emptied.
    static func journalSize() throws -> Int {
        guard let text = ProcessInfo.processInfo.environment["THING_AGENT_JOURNAL_SIZE"] else {
            return Journal.initialCapacity
        }
        guard let size = Int(text), size >= 64 << 10, size <= 1 << 40 else {
            throw AgentConfiguration.Error(.setting, source: "THING_AGENT_JOURNAL_SIZE", "invalid value '\(text)' "
                                           + "(bytes, at least 65536)")
        }
        return size
    }

    /// Counters of the receive path.
    public var statistics: IngestStatistics { ingestor.counters.snapshot }

    public var connectionState: MQTTConnectionState { client.state }

    /// Connects and subscribes. Throws a clear error when the broker cannot be used.
    package func start() async throws {
        flusher.start()
        if role.writesCache { registerProducts() }
        // Before the agent's own connection: the roles it publishes under are given first (a change to its
        // user's roles drops every connection of that user), and every device's access is brought in line.
        try resetInterruptedActivations()
        try await provisioning?.access.prepare()
        try await client.connect()
        let filters = dialects.subscriptions.map { ($0.filter, QoS(rawValue: $0.qos) ?? .atLeastOnce) }
        let activations = provisioning.map { _ in [(topics.activations, QoS.atLeastOnce)] } ?? []
        let api = apiQueue.map { queue in queue.filters.enumerated().map { ($1, $0 == 0 ? QoS.atLeastOnce : .atMostOnce) } } ?? []
        let group = (lease?.filters ?? []).map { ($0, QoS.atLeastOnce) } + (replica.map { [($0.filter, .atLeastOnce)] } ?? [])
        let homeAssistant = configuration.homeAssistant.enabled
            ? (self.homeAssistant?.topics.subscriptions ?? []).map { ($0, QoS.atLeastOnce) } : []
        try await client.subscribe(filters + api + activations + group + homeAssistant)
        readiness.subscribed()
        if role.speaksForTheFleet {
            // The retained online status went out with the CONNACK (`MQTTConfiguration.birth`), before these
            // subscriptions: the broker handles a connection's packets in order, so it is in place by now.
            logger.info("connected and subscribed", metadata: [
                "broker": connectionLog.broker.url, "devices": "\(cache.count)", "root": topics.root])
            linkEngine.start(self)
        }
    }

    /// Config `deviceProducts` for devices the cache already knows with another product or none (heard before they
    /// were registered): recorded in their information, as for one first heard after. Not journaled: every start
    /// applies it again.
    private func registerProducts() {
        for (device, product) in configuration.deviceProducts.sorted(by: { $0.key < $1.key }) {
            guard let known = cache.device(device), known.info.productId != product else { continue }
            let now = Timestamp.now()
            do {
                _ = try writer.apply(.info(JSONObject([("productId", .string(product))]), time: now), to: device, now: now)
                logger.info("product registered", metadata: ["device": device, "product": product])
            } catch {
                logger.warning("could not record a registered product", metadata: ["device": device, "error": "\(error)"])
            }
        }
    }

    /// Starts, works until the calling task is cancelled, then stops gracefully (also when cancelled while still
    /// waiting for the broker). The service waits for a broker that is not up yet (retrying with backoff); refused
    /// credentials or a TLS set-up that cannot work end `run()` with the error at once.
    /// `onStarted` runs once the broker acknowledged the subscriptions (systemd's READY=1).
    public func run(onStarted: (@Sendable () -> Void)? = nil) async throws {
        // Registered before connecting, so the feed starts with the first message (and counts as a listener
        // from then on).
        let events = role.writesCache && configuration.events.publish
            ? self.events.events(kinds: .all, queueLimit: configuration.events.queueLimit) : nil
        // Before the broker: an address that cannot be served is a set-up error of its own, said at once, not a
        // broker problem found after the connection.
        let metrics: HTTPServer?
        do {
            metrics = try startMetricsServer()
        } catch {
            await stop()
            throw error
        }
        defer { metrics?.stop() }
        do {
            try await startWhenBrokerIsUp()
        } catch {
            await stop()
            // Cancelled while still waiting for the broker: that is a graceful stop too, not a failure.
            if Task.isCancelled { return }
            throw error
        }
        onStarted?()
        // Its parts, each until cancelled: the timers and engines, the event feed and the API.
        await runUntilCancelled(parts(feed: events))
        await stop()
    }

    /// One piece of the agent's work with a life of its own: it runs until its task is cancelled. `Agent.run`
    /// runs the daemon's parts side by side, a stand-in its `timers` (the shape of swift-service-lifecycle's
    /// `Service` and Hummingbird's `Application.services`).
    struct Part: Sendable {
        let name: String
        let run: @Sendable () async -> Void
    }

    /// Everything `run()` keeps going once connected: the timers, the event feed (when the agent publishes one) and
    /// the API (when it serves one).
    func parts(feed: DeviceEventStream?) -> [Part] {
        var parts = timers()
        if let feed {
            parts.append(Part(name: "event feed") {
                await EventPublisher.run(feed, client: self.client, prefix: self.configuration.events.topic,
                                         qos: QoS(rawValue: self.configuration.events.qos) ?? .atLeastOnce,
                                         counters: self.integration, standing: self.standing)
            })
        }
        parts += groupParts()
        if let apiQueue { parts.append(Part(name: "API") { await AgentAPI(agent: self, queue: apiQueue).run() }) }
        if let homeAssistant { parts.append(Part(name: "Home Assistant") { await homeAssistant.run(self) }) }
        return parts
    }

    /// The timers and engines the role keeps (`Role`): offline warnings, the end of stalled gateway transfers and
    /// firmware upgrades, the links' sender, and with provisioning the activations, the pairings' expiry and the
    /// broker's access.
    func timers() -> [Part] {
        var parts: [Part] = []
        if role.writesCache {
            parts.append(Part(name: "offline warnings") { await self.offlineWatch.run() })
            parts.append(Part(name: "transfer stalls") { await self.transferWatch.run(self.standing) })
            parts.append(Part(name: "upgrade stalls") { await self.otaWatch.run(self.standing) })
        }
        if role.speaksForTheFleet { parts.append(Part(name: "links") { await self.linkEngine.run(self) }) }
        if let provisioning {
            parts.append(Part(name: "activations") { await self.serveActivations(provisioning) })
            parts.append(Part(name: "pairing expiry") { await self.runPairingCleanup(provisioning) })
            parts.append(Part(name: "broker access") { await provisioning.access.runSyncs() })
        }
        return parts
    }

    /// Runs the role's timers until the calling task is cancelled. `run()` runs them with the other parts; a caller
    /// that uses `start()` and `stop()` itself (a stand-in) runs them in a task of its own.
    package func runTimers() async {
        await runUntilCancelled(timers())
    }

    /// Runs the parts side by side until the calling task is cancelled, also when there is none to run (an observer).
    /// A part that ends before that (its stream finished) is said in the debug log.
    private func runUntilCancelled(_ parts: [Part]) async {
        await withDiscardingTaskGroup { group in
            for part in parts {
                group.addTask {
                    await part.run()
                    if !Task.isCancelled { self.logger.debug("a part of the agent ended", metadata: ["part": part.name]) }
                }
            }
            group.addTask {
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            }
        }
    }

    private func startWhenBrokerIsUp() async throws {
        let floor = Duration.milliseconds(100)
        var delay = max(floor, configuration.mqtt.reconnectMinDelay)
        while true {
            do {
                return try await start()
            } catch let error as MQTTError where role.writesCache && Self.isTransient(error) {
                let what = error.kind == .connectionRefused || error.kind == .timeout
                    ? "broker not reachable" : "connection lost while starting"
                logger.warning("\(what); retrying in \(delay.seconds.fixed(1)) s",
                               metadata: ["broker": configuration.mqtt.broker, "error": "\(error)"])
                try await Task.sleep(for: delay)
                delay = min(max(configuration.mqtt.reconnectMaxDelay, floor), delay * 2)
            }
        }
    }

    /// Worth another try: the broker is not there yet, or the connection was lost while subscribing (under load,
    /// or another client with the same id took it) and the client is already reconnecting.
    private static func isTransient(_ error: MQTTError) -> Bool {
        [.connectionRefused, .timeout, .notConnected, .clientIDInUse].contains(error.kind)
    }

    /// Announces offline, disconnects (no more messages are taken), ends pending requests and listener streams.
    package func stop() async {
        linkEngine.stop()
        ingestor.stopWaiting()
        if let lease, client.state == .connected { await lease.release(client: client) }
        replica?.finish()
        if role.speaksForTheFleet, client.state == .connected {
            // At QoS 0: a QoS 1 publish waits in the library while its in-flight window is full (the event feed's
            // publishes, acknowledged behind a backlog of messages to the agent), and the DISCONNECT queued after
            // it then closes the connection before it was ever sent. A QoS 0 one is queued at once, so it goes out
            // before the DISCONNECT, and nothing waits for the broker; should the connection break before that,
            // the will says the same.
            try? await client.publish(configuration.announceTopic, payload: Self.announcement(online: false, standing),
                                      qos: .atMostOnce, retain: true)
        }
        await client.disconnect()
        if role.writesCache { offlineWatch.save() }
        flusher.stop()
        if role.writesCache {
            // The WAL goes into the main file, so that the file alone (a copy, a backup) holds everything.
            do {
                try writer.checkpoint()
            } catch {
                logger.warning("could not checkpoint the cache file", metadata: [
                    "file": configuration.cache.database, "error": "\(error)"])
            }
        }
        apiQueue?.finish()
        if let provisioning {
            provisioning.finish()
            await provisioning.access.dynsec.disconnect()
        }
        tracker.cancelAll()
        events.finishAll()
        // Everything is written: the file is the next writer's (a daemon starting again, a command).
        cacheLock?.release()
        // A short-lived CLI client stopping is not news on every command's stderr.
        logger.log(role.speaksForTheFleet ? .info : .debug, "stopped")
    }

    /// Feeds a message to the receive path as if the broker had delivered it (benchmarks and tests of the
    /// receive path without a network in between). Each message is a network turn of its own.
    package func receive(_ message: MQTTMessage) {
        ingestor.handle(message)
        ingestor.endTurn()
    }

    // MARK: requests

    /// Waits until the agent is connected to the broker and subscribed (at once when it is): `run()` starts the
    /// connection in its own task, and a request sent before it is up fails as not sent. Throws `.notSent` when the
    /// broker was not reachable within `timeout` (default `requestTimeout`), `.cancelled` when the task was.
    public func waitUntilConnected(timeout: Duration? = nil) async throws(RequestError) {
        let limit = timeout ?? configuration.requestTimeout
        guard await readiness.wait(timeout: limit) else {
            if Task.isCancelled { throw .cancelled }
            throw .notSent(reason: "not connected to the broker \(configuration.mqtt.broker) within "
                           + "\(limit.seconds.shortest) s")
        }
    }

    /// Sends a request to a device and waits for its answer: success returns it, a non-zero code is `.refused`.
    /// A device known to be offline fails at once unless `force` is set.
    public func request(_ kind: RequestKind, to deviceId: String, data: JSONValue? = nil,
                        timeout: Duration? = nil, force: Bool = false) async throws(RequestError) -> Response {
        try await send(kind, to: deviceId, data: data, timeout: timeout, force: force).result.get()
    }

    /// Sends a request and reports how it ended, never throwing: success (code 0), refused (another code),
    /// timeout (default `requestTimeout`), not sent (not connected), offline (known offline and not `force`),
    /// too many in flight (`maxInFlight`), or cancelled.
    public func send(_ kind: RequestKind, to deviceId: String, data: JSONValue? = nil,
                     timeout: Duration? = nil, force: Bool = false) async -> RequestOutcome {
        let started = ContinuousClock.now
        func ended(_ msgId: String?, _ result: Result<Response, RequestError>) -> RequestOutcome {
            let outcome = RequestOutcome(deviceId: deviceId, kind: kind, msgId: msgId, result: result,
                                         elapsed: ContinuousClock.now - started)
            requestMetrics.record(outcome)
            return outcome
        }
        let msgId: String
        let outbound: OutboundMessage
        do throws(RequestError) {
            try checkReachable(deviceId, force: force)
            guard client.state == .connected else {
                throw .notSent(reason: "not connected to the broker (waitUntilConnected waits for it)")
            }
            let info = cache.device(deviceId)?.info
            guard let dialect = dialects.dialect(for: deviceId, known: info?["dialect"]?.stringValue,
                                                 productId: info?.productId) else {
                throw .unsupported(deviceId: deviceId, reason: "no dialect of this agent addresses it"
                                   + (info?["dialect"]?.stringValue.map { " (it speaks \($0))" } ?? ""))
            }
            if let refusal = dialect.refusal(kind, device: deviceId, productId: info?.productId) {
                throw .unsupported(deviceId: deviceId, reason: refusal)
            }
            msgId = try tracker.register(deviceId: deviceId, kind: kind)
            guard let request = dialect.request(kind, device: deviceId, msgId: msgId, data: data,
                                                time: Timestamp.now()) else {
                tracker.fail(msgId, .unsupported(deviceId: deviceId, reason: "\(dialect.name) has no \(kind.rawValue)"))
                return ended(msgId, await tracker.wait(for: msgId, timeout: .seconds(1)))
            }
            if let limit = dialect.maxDownlinkBytes, request.payload.count + request.topic.utf8.count > limit {
                tracker.fail(msgId, .unsupported(deviceId: deviceId, reason: "the request is \(request.payload.count) "
                                                 + "bytes; \(dialect.name) devices take at most \(limit)"))
                return ended(msgId, await tracker.wait(for: msgId, timeout: .seconds(1)))
            }
            outbound = request
        } catch {
            return ended(nil, .failure(error))
        }
        let (topic, bytes, answered) = (outbound.topic, outbound.payload, outbound.answered)
        // The publish runs beside the wait, as a child task: the wait's timeout also covers a publish held up by a
        // broker that stopped answering (noticed only after the keepalive). Once the wait ends the child is
        // cancelled, which gives up waiting for the PUBACK (the message may still go out).
        let client = client, tracker = tracker, logger = logger
        var result = await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do throws(MQTTError) {
                    try await client.publish(topic, payload: bytes, qos: .atLeastOnce)
                    if !answered {
                        tracker.resolve(deviceId: deviceId, kind: kind, Response(
                            msgId: msgId, code: 0, message: "sent (the device answers no such request)", data: nil,
                            time: Timestamp.now()))
                    }
                } catch {
                    // Given up because the request already ended: nothing to say.
                    if Task.isCancelled { return }
                    guard error.kind == .notConnected else {
                        tracker.fail(msgId, .notSent(reason: "\(error)"))
                        return
                    }
                    // The connection dropped before the broker's PUBACK: libmosquitto sends the message again
                    // after reconnecting, so the device may still get it and answer. Saying "not sent" could be
                    // false; the request goes on to its answer or its timeout.
                    logger.notice("connection lost while sending a request; it is resent on reconnect", metadata: [
                        "topic": topic, "msgId": msgId])
                }
            }
            let result = await tracker.wait(for: msgId, timeout: timeout ?? configuration.requestTimeout)
            group.cancelAll()
            return result
        }
        if case .success(let answer) = result, answer.code != 0 {
            result = .failure(.refused(code: answer.code, message: answer.message))
        }
        return ended(msgId, result)
    }

    /// Throws when a request to `deviceId` must not be sent: an invalid id, or a device known to be offline
    /// (unless `force`: a device with a persistent session gets it when it returns).
    func checkReachable(_ deviceId: String, force: Bool) throws(RequestError) {
        guard DeviceID.isValid(deviceId) else { throw .unsupported(deviceId: deviceId, reason: "not a valid device id") }
        if !force, cache.device(deviceId)?.online == false { throw .deviceOffline(deviceId: deviceId) }
    }

    /// Asks the device for fresh information, waits for it, and returns the cached info it was merged into.
    public func fetchInfo(_ deviceId: String, timeout: Duration? = nil) async throws(RequestError) -> DeviceInfo {
        let answer = try await request(.getInfo, to: deviceId, timeout: timeout)
        guard answer.data?.objectValue != nil else {
            throw .notSent(reason: "the answer from \(deviceId) carried no device information")
        }
        // The receive path merged the answer into the cache before handing it to us.
        return cache.device(deviceId)?.info ?? DeviceInfo(devId: deviceId)
    }

    // MARK: helpers

    /// `{"status":"online"|"offline","time":...}`, and in a group its name, and while online the instance's role
    /// (`active`, `standby`) and since when (`thing-agent status` reads them).
    static func announcement(online: Bool, _ standing: Standing? = nil) -> [UInt8] {
        var object = JSONObject([("status", .string(online ? "online" : "offline")), ("time", .integer(Timestamp.now()))])
        if let standing, let group = standing.group {
            object["group"] = .string(group)
            if online {
                object["role"] = .string(standing.role)
                object["since"] = .integer(standing.since)
            }
        }
        return JSONValue.object(object).serializedBytes()
    }

    /// The daemon's connection (`daemon`: its client id, persistent session, will and birth), or a command's.
    static func mqttConfiguration(_ config: AgentConfiguration, daemon: Bool,
                                  standing: Standing? = nil) -> MQTTConfiguration {
        let clientID = daemon ? config.mqtt.clientID : config.commandClientID
        var mqtt = config.mqtt.connection(clientID: clientID)
        let persistent = daemon && config.mqtt.persistentSession
        mqtt.cleanSession = !persistent
        if persistent, mqtt.protocolVersion != .v311 { mqtt.sessionExpiry = UInt32(config.mqtt.sessionExpiry) }
        if daemon {
            mqtt.will = MQTTWill(topic: config.announceTopic, payload: announcement(online: false, standing),
                                 qos: .atLeastOnce, retain: true)
            // After every connect and reconnect, before anything else: the will (or a broker restart without
            // persistence) left the retained status offline or empty while the agent works again.
            mqtt.birth = MQTTBirth(topic: config.announceTopic, qos: .atLeastOnce, retain: true) {
                announcement(online: true, standing)
            }
        }
        return mqtt
    }
}
