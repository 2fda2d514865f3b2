import FoundationEssentials
import JSON
import MQTT
import SQLite
import Synchronization
import ThingAgentCore

/// What the daemon gave Home Assistant for one discovery config (table `home_assistant`).
struct HomeAssistantRecord: Sendable, Equatable {
    /// Nil for the agent's own device (its scenes).
    var device: String?
    /// `homeAssistant.topic` when it was published: where its state and availability are cleared.
    var statePrefix: String?
    /// The component ids in the config, each with its platform.
    var components: [String: String]
    /// FNV-1a of the payload.
    var digest: Int64
}

extension LocalStore {
    func homeAssistantRecords() throws -> [String: HomeAssistantRecord] {
        try withDatabase { db in
            var records: [String: HomeAssistantRecord] = [:]
            for row in try db.query("SELECT config_topic, dev_id, state_prefix, components, digest FROM home_assistant") {
                guard let topic = row.string("config_topic"), let text = row.string("components") else { continue }
                var components: [String: String] = [:]
                for (id, platform) in (try? JSONParser.parse(Array(text.utf8)))?.objectValue ?? [:] {
                    components[id] = platform.stringValue
                }
                records[topic] = HomeAssistantRecord(device: row.string("dev_id"), statePrefix: row.string("state_prefix"),
                                                     components: components, digest: row.int("digest") ?? 0)
            }
            return records
        }
    }

    /// Upserts (nil: deletes) the records of the given config topics in one transaction.
    func saveHomeAssistant(_ changes: [(topic: String, record: HomeAssistantRecord?)]) throws {
        guard !changes.isEmpty else { return }
        try withDatabase { db in
            try db.transaction {
                for (topic, record) in changes {
                    guard let record else {
                        try db.run("DELETE FROM home_assistant WHERE config_topic = ?", [.text(topic)])
                        continue
                    }
                    let components = JSONObject(record.components.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })
                    try db.run("""
                        INSERT INTO home_assistant (config_topic, dev_id, state_prefix, components, digest)
                        VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT(config_topic) DO UPDATE SET dev_id = excluded.dev_id,
                            state_prefix = excluded.state_prefix, components = excluded.components,
                            digest = excluded.digest
                        """, [.text(topic), record.device.map(SQLiteValue.text) ?? .null,
                              record.statePrefix.map(SQLiteValue.text) ?? .null,
                              .text(JSONValue.object(components).serialized()), .integer(record.digest)])
                }
            }
        }
    }
}

/// Home Assistant's side of the daemon (docs/home-assistant.md): publishes a discovery config per device, its
/// state and availability when the writer's change feed says something changed, takes Home Assistant's commands
/// and runs them through the tracked paths (`sendPropertySet`, `invokeAction`, `startUpgrade`, `runScene`), and
/// removes what it published when the feature is turned off.
///
/// A watch of the writer: on the receive path it only marks the device (a `Mutex`ed set); one task works the
/// marked devices off, paced (`publishRate`), in batches acknowledged by the broker, so a fleet's worth of
/// discovery after a start never holds up ingest. Commands arrive through the API's path for topics outside the
/// device tree, into a bounded queue a task of their own takes.
final class HomeAssistantPublisher: CacheWatch, Sendable {
    let settings: AgentConfiguration.HomeAssistant
    let topics: HomeAssistantTopics
    private let logger: AgentLogger

    private struct Work: ~Copyable {
        /// Devices to look at, in the order marked, and whether their config may have changed.
        var order: [String] = []
        var marked: [String: Bool] = [:]
        var removed: Set<String> = []
        var scenes = false
        /// Publish everything again even where nothing changed (Home Assistant's birth).
        var forced: Set<String> = []
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let work = Mutex(Work())
    private let inbox: AsyncStream<MQTTMessage>
    private let inboxInput: AsyncStream<MQTTMessage>.Continuation
    /// Counters for the bench and the tests: messages published, commands refused, commands dropped.
    let published = Atomic<Int>(0)
    let refused = Atomic<Int>(0)
    let dropped = Atomic<Int>(0)
    /// Set once the first pass over the fleet after the start is published (the bench waits on it).
    let initialPassDone = Atomic<Bool>(false)

    /// Commands waiting at most; beyond, dropped and logged.
    static let inboxLimit = 1024
    /// Commands run at once (each waits for its device's answer).
    static let concurrentCommands = 64
    /// Devices looked at per batch.
    static let batchDevices = 64
    /// The key of the agent's own device in the work list (no device id is empty).
    static let agentKey = ""

    init(settings: AgentConfiguration.HomeAssistant, agentStatus: String, logger: AgentLogger) {
        self.settings = settings
        topics = HomeAssistantTopics(settings, agentStatus: agentStatus)
        self.logger = logger
        (inbox, inboxInput) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .bufferingOldest(Self.inboxLimit))
    }

    // MARK: the writer's change feed (the receive path's thread: marks only)

    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        mark(device, config: changes.info)
    }

    func removed(_ device: String) {
        let waiter = work.withLock { work -> CheckedContinuation<Void, Never>? in
            work.removed.insert(device)
            work.marked[device] = nil
            defer { work.waiter = nil }
            return work.waiter
        }
        waiter?.resume()
    }

    func upgradeChanged(_ upgrade: OTAUpgrade) {
        mark(upgrade.deviceId, config: false)
    }

    /// The device's name, room or model may have changed: its config is built again.
    func mark(_ device: String, config: Bool = true, force: Bool = false) {
        let waiter = work.withLock { work -> CheckedContinuation<Void, Never>? in
            if let had = work.marked[device] {
                if config && !had { work.marked[device] = true }
            } else {
                work.marked[device] = config
                work.order.append(device)
            }
            if force { work.forced.insert(device) }
            defer { work.waiter = nil }
            return work.waiter
        }
        waiter?.resume()
    }

    func scenesChanged() {
        let waiter = work.withLock { work -> CheckedContinuation<Void, Never>? in
            work.scenes = true
            defer { work.waiter = nil }
            return work.waiter
        }
        waiter?.resume()
    }

    /// Every device and the scenes again (the start, a reload of the models or the catalog, Home Assistant's
    /// birth with `force`).
    func markAll(_ devices: [String], force: Bool) {
        let waiter = work.withLock { work -> CheckedContinuation<Void, Never>? in
            for device in devices {
                if work.marked[device] == nil { work.order.append(device) }
                work.marked[device] = true
                if force { work.forced.insert(device) }
            }
            work.scenes = true
            if force { work.forced.insert(Self.agentKey) }
            defer { work.waiter = nil }
            return work.waiter
        }
        waiter?.resume()
    }

    // MARK: messages outside the device tree (the receive path's thread)

    /// Takes Home Assistant's commands and birth message; false for any other topic.
    func accept(_ message: MQTTMessage) -> Bool {
        guard let inbound = topics.route(message.topic) else { return false }
        if inbound == .birth {
            // Its birth message (not a retained one a client left behind: the start publishes everything anyway).
            if !message.retain, message.payload == Array("online".utf8) { inboxInput.yield(message) }
            return true
        }
        if case .dropped = inboxInput.yield(message) {
            dropped.add(1, ordering: .relaxed)
            logger.warning("Home Assistant command dropped: too many waiting", metadata: ["topic": message.topic])
        }
        return true
    }

    // MARK: the task

    /// Publishes until cancelled; with the feature off, removes what an earlier run published, then ends.
    func run(_ agent: Agent) async {
        guard let local = agent.local else { return }
        let records: [String: HomeAssistantRecord]
        do {
            records = try local.homeAssistantRecords()
        } catch {
            logger.error("cannot read what Home Assistant was given", metadata: ["error": "\(error)"])
            return
        }
        guard settings.enabled else {
            if !records.isEmpty { await removeEverything(records, agent: agent, local: local) }
            return
        }
        // Whatever the file records that the fleet no longer has (a device removed while no daemon ran, another
        // discovery prefix): removed first.
        let devices = agent.cache.all().map(\.id)
        let present = Set(devices.map(topics.config(device:))).union([topics.agentConfig])
        let stale = records.filter { !present.contains($0.key) }
        markAll(devices, force: false)
        await withDiscardingTaskGroup { group in
            group.addTask { await self.publishLoop(agent, local: local, records: records, stale: stale) }
            group.addTask { await self.commandLoop(agent) }
        }
    }

    /// The empty retained messages that take back a config the file records, with its device's state.
    private func emptied(_ topic: String, _ record: HomeAssistantRecord) -> [(topic: String, payload: [UInt8])] {
        var messages = [(topic: topic, payload: [UInt8]())]
        if let device = record.device {
            let prefix = record.statePrefix ?? settings.topic
            messages += [("\(prefix)/\(device)/state", []), ("\(prefix)/\(device)/availability", [])]
        }
        return messages
    }

    private func publishLoop(_ agent: Agent, local: LocalStore, records: [String: HomeAssistantRecord],
                             stale: [String: HomeAssistantRecord]) async {
        var records = records
        var stale = stale
        var states: [String: Int64] = [:]
        var availability: [String: String] = [:]
        var firstPass = work.withLock { $0.order.count }
        while !Task.isCancelled {
            await waitForWork()
            if Task.isCancelled { return }
            do {
                try await agent.waitUntilConnected(timeout: .seconds(3600))
            } catch {
                continue
            }
            let (batch, removals, scenes, forced) = work.withLock { work in
                let count = min(Self.batchDevices, work.order.count)
                let batch = work.order.prefix(count).map { ($0, work.marked[$0] ?? false) }
                work.order.removeFirst(count)
                for (device, _) in batch { work.marked[device] = nil }
                let removals = work.removed
                work.removed = []
                let scenes = work.scenes
                work.scenes = false
                let forced = work.forced
                work.forced.subtract(batch.map(\.0) + (scenes ? [Self.agentKey] : []))
                return (batch, removals, scenes, forced)
            }
            var messages: [(topic: String, payload: [UInt8])] = []
            var changes: [(topic: String, record: HomeAssistantRecord?)] = []
            var stateChanges: [(String, Int64?, String?)] = []
            // What an earlier run published that the fleet no longer has (a device removed while no daemon ran,
            // another discovery prefix or topic): taken back first.
            for (topic, record) in stale.sorted(by: { $0.key < $1.key }) {
                messages += emptied(topic, record)
                changes.append((topic, nil))
            }
            stale = [:]
            for device in removals.sorted() {
                let topic = topics.config(device: device)
                messages += [(topic, []), (topics.state(device), []), (topics.availability(device), [])]
                changes.append((topic, nil))
                stateChanges.append((device, nil, nil))
            }
            if scenes {
                let names = ((try? local.scenes()) ?? []).map(\.name)
                let topic = topics.agentConfig
                let record = records[topic]
                var removedComponents = record?.components ?? [:]
                let config = HomeAssistantDiscovery.agentConfig(scenes: names, topics: topics)
                let platforms = config.map(HomeAssistantDiscovery.platforms) ?? [:]
                for id in platforms.keys { removedComponents[id] = nil }
                if config != nil {
                    let full = HomeAssistantDiscovery.agentConfig(scenes: names, topics: topics, removed: removedComponents)!
                    let bytes = JSONValue.object(full).serializedBytes()
                    let digest = Self.digest(bytes)
                    if digest != record?.digest || forced.contains(Self.agentKey) {
                        messages.append((topic, bytes))
                        changes.append((topic, HomeAssistantRecord(device: nil, statePrefix: nil, components: platforms,
                                                                   digest: digest)))
                    }
                } else if record != nil {
                    messages.append((topic, []))
                    changes.append((topic, nil))
                }
            }
            for (device, configChanged) in batch where !removals.contains(device) {
                guard let snapshot = agent.cache.device(device) else { continue }
                let input = HomeAssistantDevice(
                    snapshot: snapshot, metadata: try? local.metadata(device),
                    model: agent.models.model(for: snapshot.info.productId),
                    latest: agent.firmwareCatalog.latest(for: snapshot.info.productId), upgrade: agent.upgrade(device))
                let entities = input.entities
                let topic = topics.config(device: device)
                let record = records[topic]
                let platforms = Dictionary(uniqueKeysWithValues: entities.entities.map { ($0.id, $0.platform) })
                let force = forced.contains(device)
                if configChanged || force || record?.components != platforms {
                    var gone = record?.components ?? [:]
                    for id in platforms.keys { gone[id] = nil }
                    let config = HomeAssistantDiscovery.config(input, entities: entities, topics: topics, removed: gone)
                    let bytes = JSONValue.object(config).serializedBytes()
                    let digest = Self.digest(bytes)
                    if digest != record?.digest || force {
                        messages.append((topic, bytes))
                        changes.append((topic, HomeAssistantRecord(device: device, statePrefix: settings.topic,
                                                                   components: platforms, digest: digest)))
                    }
                }
                let online = HomeAssistantDiscovery.availability(snapshot)
                if online != availability[device] || force {
                    messages.append((topics.availability(device), Array(online.utf8)))
                }
                let state = JSONValue.object(HomeAssistantDiscovery.state(input, entities: entities)).serializedBytes()
                let stateDigest = Self.digest(state)
                if stateDigest != states[device] || force {
                    messages.append((topics.state(device), state))
                }
                stateChanges.append((device, stateDigest, online))
            }
            guard !messages.isEmpty else {
                firstPass = await passProgress(firstPass, batch.count)
                continue
            }
            let started = ContinuousClock.now
            let outcomes = await agent.client.publish(inOrder: messages, qos: .atLeastOnce, retain: true)
            let sent = outcomes.filter { if case .success = $0 { true } else { false } }.count
            published.add(sent, ordering: .relaxed)
            if sent < outcomes.count {
                // Not connected, or lost before the broker had them: the same devices again once connected.
                for (topic, record) in changes where record == nil && records[topic] != nil && !removals.contains(
                    records[topic]?.device ?? "\u{0}") { stale[topic] = records[topic] }
                logger.notice("Home Assistant messages not acknowledged; publishing them again", metadata: [
                    "messages": "\(outcomes.count - sent)"])
                for device in removals { removed(device) }
                for (device, _) in batch { mark(device, config: true, force: true) }
                if scenes { scenesChanged() }
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            for (topic, record) in changes { records[topic] = record }
            do {
                try local.saveHomeAssistant(changes)
            } catch {
                logger.error("cannot record what Home Assistant was given", metadata: ["error": "\(error)"])
            }
            for (device, state, online) in stateChanges {
                states[device] = state
                availability[device] = online
            }
            firstPass = await passProgress(firstPass, batch.count)
            // Paced: at most `publishRate` messages a second, whatever the broker would take.
            let budget = Duration.seconds(Double(messages.count) / settings.publishRate)
            let spent = ContinuousClock.now - started
            if spent < budget { try? await Task.sleep(for: budget - spent) }
        }
    }

    /// Counts the first pass down; says when it is done.
    private func passProgress(_ remaining: Int, _ done: Int) async -> Int {
        guard remaining > 0 else { return 0 }
        let left = max(0, remaining - done)
        if left == 0 {
            initialPassDone.store(true, ordering: .relaxed)
            logger.info("Home Assistant discovery published", metadata: ["messages": "\(published.load(ordering: .relaxed))"])
        }
        return left
    }

    private func waitForWork() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let now = work.withLock { work -> Bool in
                    if !work.order.isEmpty || !work.removed.isEmpty || work.scenes { return true }
                    work.waiter = waiter
                    return false
                }
                if now { waiter.resume() }
            }
        } onCancel: {
            let waiter = work.withLock { work -> CheckedContinuation<Void, Never>? in
                defer { work.waiter = nil }
                return work.waiter
            }
            waiter?.resume()
        }
    }

    /// Feature off: an empty retained config for every config the file records (Home Assistant removes the
    /// device's entities), the states and availability cleared, the records deleted.
    private func removeEverything(_ records: [String: HomeAssistantRecord], agent: Agent, local: LocalStore) async {
        while !Task.isCancelled {
            do {
                try await agent.waitUntilConnected(timeout: .seconds(3600))
            } catch {
                continue
            }
            var messages: [(topic: String, payload: [UInt8])] = []
            for (topic, record) in records.sorted(by: { $0.key < $1.key }) { messages += emptied(topic, record) }
            let outcomes = await agent.client.publish(inOrder: messages, qos: .atLeastOnce, retain: true)
            guard outcomes.allSatisfy({ if case .success = $0 { true } else { false } }) else {
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            do {
                try local.saveHomeAssistant(records.keys.map { ($0, nil) })
            } catch {
                logger.error("cannot record what Home Assistant was given", metadata: ["error": "\(error)"])
            }
            logger.info("Home Assistant is off: removed what it was given", metadata: ["configs": "\(records.count)"])
            return
        }
    }

    static func digest(_ bytes: [UInt8]) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }

    // MARK: commands

    private func commandLoop(_ agent: Agent) async {
        await withTaskGroup(of: Void.self) { group in
            var running = 0
            for await message in inbox {
                if Task.isCancelled { break }
                if topics.route(message.topic) == .birth {
                    logger.info("Home Assistant is back (its birth message): publishing everything again")
                    markAll(agent.cache.all().map(\.id), force: true)
                    continue
                }
                if running >= Self.concurrentCommands {
                    await group.next()
                    running -= 1
                }
                running += 1
                group.addTask { await self.execute(message, agent: agent) }
            }
            group.cancelAll()
        }
    }

    /// Runs one command through the tracked path; a refusal or failure is logged and published as an event.
    func execute(_ message: MQTTMessage, agent: Agent) async {
        let text = String(decoding: message.payload.prefix(256), as: UTF8.self)
        switch topics.route(message.topic) {
        case .command(let device):
            guard DeviceID.isValid(device) else {
                refuse(nil, text, "invalid", "'\(device.prefix(80))' is not a device id", agent: agent)
                return
            }
            guard !message.retain else {
                refuse(device, text, "invalid", "a retained command is not run (publish commands without retain)",
                       agent: agent)
                return
            }
            guard let snapshot = agent.cache.device(device) else {
                refuse(device, text, "invalid", "unknown device", agent: agent)
                return
            }
            let input = HomeAssistantDevice(snapshot: snapshot, metadata: nil,
                                            model: agent.models.model(for: snapshot.info.productId),
                                            latest: agent.firmwareCatalog.latest(for: snapshot.info.productId))
            let commands: [HomeAssistantCommand]
            do {
                commands = try HomeAssistantCommand.read(message.payload, entities: input.entities,
                                                         properties: snapshot.properties)
            } catch {
                refuse(device, text, "invalid", error.description, agent: agent)
                return
            }
            for command in commands {
                switch command {
                case .set(let values):
                    let outcome = await agent.sendPropertySet(deviceId: device, values)
                    if !outcome.succeeded {
                        refuse(device, text, outcome.outcome, outcome.message ?? outcome.outcome, agent: agent)
                    }
                case .action(let name):
                    let outcome = await agent.invokeAction(deviceId: device, name: name)
                    if !outcome.succeeded {
                        refuse(device, text, outcome.outcome, outcome.message ?? outcome.outcome, agent: agent)
                    }
                case .install:
                    guard let image = input.latest else {
                        refuse(device, text, "invalid", "the firmware catalog has no image for its product", agent: agent)
                        continue
                    }
                    do {
                        _ = try await agent.startUpgrade(device, image: image)
                    } catch {
                        refuse(device, text, error.name, error.description, agent: agent)
                    }
                }
            }
        case .scene:
            guard !message.retain else {
                refuse(nil, text, "invalid", "a retained scene command is not run", agent: agent)
                return
            }
            guard let name = (try? JSONParser.parse(message.payload))?["scene"]?.stringValue else {
                refuse(nil, text, "invalid", "a scene command is {\"scene\":NAME}", agent: agent)
                return
            }
            do {
                let report = try await agent.runScene(named: name)
                for action in report.actions where !action.outcome.succeeded {
                    refuse(action.outcome.deviceId, text, action.outcome.outcome,
                           "scene \(name): " + (action.outcome.message ?? action.outcome.outcome), agent: agent)
                }
            } catch {
                refuse(nil, text, "invalid", "scene \(name.prefix(80)): \(error)", agent: agent)
            }
        case .birth, nil:
            break
        }
    }

    /// Logs the refusal and, for a device, publishes it as the device's `command` event.
    private func refuse(_ device: String?, _ command: String, _ outcome: String, _ message: String, agent: Agent) {
        refused.add(1, ordering: .relaxed)
        logger.warning("Home Assistant command not done: \(message)", metadata: [
            "device": device ?? "", "outcome": outcome, "command": command])
        guard let device, DeviceID.isValid(device) else { return }
        agent.events.publish([.commandRefused(deviceId: device, refusal: CommandRefusal(
            source: "homeAssistant", command: command, outcome: outcome, message: message, time: Timestamp.now()))])
    }
}
