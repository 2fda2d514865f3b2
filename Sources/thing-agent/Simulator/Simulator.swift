import FoundationEssentials
import JSON
import MQTT
import Synchronization
import ThingAgent

/// Runs a simulated fleet on the broker: brings the devices up (spread over the ramp), sends their reports on
/// their intervals, answers requests, runs gateway transfers, and on the way out publishes every device offline.
final class Simulator: Sendable {
    let options: SimulatorOptions
    let devices: [VirtualDevice]
    let connectionPlan: ConnectionPlan
    let stats = SimulatorStats()
    private let deviceById: [String: VirtualDevice]
    private let connectionOf: [String: SimulatorConnection]
    private let connections: [SimulatorConnection]
    private let transfers = Mutex<[String: Task<Void, Never>]>([:])
    /// The Alink and TuyaLink gateways that have logged their sub-devices in.
    private let sessions = GatewaySessions()
    /// The TuyaLink gateways' binds the platform answered.
    let binds = TuyaLinkBinds()

    /// `credentials`: each device's own (`--provision`); its connection then uses them, its id as client id.
    init(options: SimulatorOptions, configuration: AgentConfiguration, models: ThingModels,
         credentials: [String: DeviceCredentials] = [:]) throws {
        self.options = options
        let topics = configuration.topics
        let plans = FleetPlan.make(options)
        devices = plans.map { plan in
            var facts: [String: JSONValue] = ["gateway_name": .string(plan.name)]
            if let channel = plan.channel { facts["zigbee_channel"] = .integer(Int64(channel)) }
            facts["sub_device_count"] = .integer(Int64(plans.filter { $0.gatewayId == plan.id }.count))
            return VirtualDevice(plan: plan, model: models.model(for: plan.productId), topics: topics,
                                 seed: options.seed, facts: facts)
        }
        deviceById = Dictionary(uniqueKeysWithValues: devices.map { ($0.id, $0) })
        connectionPlan = ConnectionPlan(plans, maxConnections: options.maxConnections)
        var connections: [SimulatorConnection] = []
        var connectionOf: [String: SimulatorConnection] = [:]
        for (number, link) in connectionPlan.links.enumerated() {
            let first = link.devices[0]
            let own = link.pooled ? nil : credentials[first]
            let alink = link.pooled ? nil : deviceById[first]?.plan.alink
            let tuyaLink = link.pooled ? nil : deviceById[first].flatMap { $0.plan.dialect == .tuyalink ? $0.plan : nil }
            var clientID = link.pooled ? "sim-pool-\(number)-\(first)" : own?.clientID ?? own?.username ?? "sim-\(first)"
            if let alink, own == nil {
                // Linkkit's client id; its password would be a signature with the device's secret, which a broker
                // without provisioning does not check.
                clientID = "\(alink.productKey)&\(alink.deviceName)|securemode=3,signmethod=hmacsha1,"
                    + "timestamp=\(Timestamp.current)|"
            }
            // Alink and TuyaLink devices set no will: they announce no status.
            let will = link.pooled || alink != nil || tuyaLink != nil ? nil : deviceById[first]?.will
            var mqtt = Self.mqtt(configuration, clientID: clientID, will: will)
            if let own {
                mqtt.username = own.username
                mqtt.password = own.password
            } else if let alink, mqtt.username == nil {
                mqtt.username = "\(alink.deviceName)&\(alink.productKey)"
            } else if let tuyaLink {
                mqtt = Self.tuyaLinkMQTT(mqtt, tuyaLink, options: options)
            }
            let connection = try SimulatorConnection(configuration: mqtt, topics: topics, stats: stats)
            connections.append(connection)
            for id in link.devices { connectionOf[id] = connection }
        }
        self.connections = connections
        self.connectionOf = connectionOf
    }

    /// Fails with the broker's error when a first connection cannot be made (devices would only repeat it); the
    /// TuyaLink devices' broker too, when it is another and the fleet has TuyaLink devices.
    func checkBroker(_ configuration: AgentConfiguration) async throws {
        var probes = [Self.mqtt(configuration, clientID: "sim-probe-\(options.seed)-\(UInt32.random(in: 0...UInt32.max))",
                                will: nil)]
        if let brokers = options.tuyaLinkBrokers, devices.contains(where: { $0.plan.dialect == .tuyalink }) {
            // Not `tuyalink_<id>`: the agent would take that client's connection for a device's.
            var probe = probes[0]
            probe.brokers = brokers
            probe.username = "sim-probe"
            probe.password = nil
            probes.append(probe)
        }
        for configuration in probes {
            let probe = try MQTTClient(configuration: configuration)
            do {
                try await probe.connect()
            } catch {
                await probe.disconnect()
                throw error
            }
            await probe.disconnect()
        }
    }

    /// Works until the duration passes or the calling task is cancelled, then stops the fleet.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask { await connection.serve { [self] device, reaction in self.react(device, reaction) } }
            }
            // Each child returns whether it ended the run: only the duration does. Cancelling our task (SIGINT,
            // SIGTERM) ends every child instead.
            await withTaskGroup(of: Bool.self) { fleet in
                for (position, device) in devices.enumerated() {
                    fleet.addTask {
                        await self.live(device, position: position)
                        return false
                    }
                }
                if options.duration > 0 {
                    fleet.addTask {
                        try? await Task.sleep(for: .seconds(self.options.duration))
                        return true
                    }
                }
                fleet.addTask {
                    await self.printProgress()
                    return false
                }
                while let timeIsUp = await fleet.next(), !timeIsUp {}
                fleet.cancelAll()
            }
            // Outside the run's cancellation (SIGINT, SIGTERM), else every goodbye publish gives up at once;
            // bounded, for a broker that is gone.
            await Task { await withTimeout(.seconds(5)) { await self.stop() } }.value
            group.cancelAll()
        }
    }

    /// One device's life: up at its place in the ramp, then reports on its intervals until cancelled.
    private func live(_ device: VirtualDevice, position: Int) async {
        let clock = ContinuousClock()
        let start = clock.now + .seconds(options.ramp * Double(position) / Double(max(1, devices.count)))
        try? await clock.sleep(until: start)
        guard !Task.isCancelled, let connection = connectionOf[device.id] else { return }
        // Coming online is one act, outside the run's cancellation: a device that connected announces all of it
        // (information, status, properties) also when the run ends meanwhile (a short --duration under load);
        // a cancelled publish would give up at once and leave the device half announced.
        // An Alink or TuyaLink sub-device speaks once its gateway has added (bound) it and logged it in.
        let sessionDialect = device.plan.dialect == .alink || device.plan.dialect == .tuyalink
        if sessionDialect, let gateway = device.plan.gatewayId { await sessions.waitForLogin(gateway) }
        guard !Task.isCancelled else { return }
        let up = await Task {
            // An Alink or TuyaLink gateway logs its sub-devices in once it is up, or lets them try if it is not.
            defer { if sessionDialect, device.plan.category == .gateway { sessions.loggedIn(device.id) } }
            do {
                try await connection.attach(device)
            } catch {
                Console.error("simulate: \(device.id) cannot reach the broker: \(error)")
                return false
            }
            for publication in device.comingOnline(now: Timestamp.current) { await connection.publish(publication) }
            if device.plan.dialect == .alink, device.plan.category == .gateway {
                let subs = devices.filter { $0.plan.gatewayId == device.id }
                if !subs.isEmpty {
                    await connection.publish(device.alinkTopoAdd(subs, now: Timestamp.current))
                    await connection.publish(device.alinkLogin(subs, now: Timestamp.current))
                }
            }
            if device.plan.dialect == .tuyalink, device.plan.category == .gateway {
                let subs = devices.filter { $0.plan.gatewayId == device.id }
                if !subs.isEmpty { await bindAndLogIn(subs, by: device, over: connection) }
            }
            return true
        }.value
        guard up else { return }
        stats.online.add(1, ordering: .relaxed)
        // Phases spread over the interval (golden ratio), so the fleet does not report in lockstep.
        let phase = (Double(device.plan.index) * 0.618_033_988_75).truncatingRemainder(dividingBy: 1)
        var nextReport = options.reportInterval > 0 ? start + .seconds(options.reportInterval * (1 + phase)) : nil
        var nextSignal = options.signalInterval > 0 ? start + .seconds(options.signalInterval * (1 + phase)) : nil
        while !Task.isCancelled {
            guard let wake = [nextReport, nextSignal].compactMap({ $0 }).min() else {
                try? await Task.sleep(for: .seconds(3600))
                continue
            }
            do { try await clock.sleep(until: wake) } catch { break }
            if let due = nextReport, clock.now >= due {
                if let report = device.propertyReport(all: false, now: Timestamp.current, seconds: options.reportInterval) {
                    await connection.publish(report)
                }
                // An event now and then (a light's fault, a gateway's alarm, a button press).
                if let event = device.event(chance: 0.05, now: Timestamp.current) {
                    await connection.publish(event)
                }
                nextReport = due + .seconds(options.reportInterval)
            }
            if let due = nextSignal, clock.now >= due {
                if let signal = device.signalReport(now: Timestamp.current) { await connection.publish(signal) }
                nextSignal = due + .seconds(options.signalInterval)
            }
        }
    }

    func connection(of device: VirtualDevice) -> SimulatorConnection? { connectionOf[device.id] }

    func device(_ id: String) -> VirtualDevice? { deviceById[id] }

    private func react(_ device: VirtualDevice, _ reaction: VirtualDevice.Reaction) {
        if let version = reaction.startUpgrade {
            let run = Task {
                switch device.plan.dialect {
                case .alink: await self.alinkUpgrade(device, to: version)
                case .tuyalink: await self.tuyaLinkUpgrade(device, to: version)
                case .native: await self.upgrade(device, to: version)
                }
            }
            transfers.withLock { $0["ota:" + device.id] = run }
        }
        if let bound = reaction.bound { binds.answered(device.id, msgId: bound.msgId, ids: bound.ids) }
        guard let target = reaction.startTransfer else { return }
        stats.transfers.add(1, ordering: .relaxed)
        let run = Task { await self.transfer(by: device, replacing: target) }
        transfers.withLock { $0[device.id] = run }
    }

    /// A gateway takes over `target`: its stages a step apart, then finish (or failed, at the failure rate). On
    /// finish the target's sub-devices in this fleet report their new gateway, after the finish.
    private func transfer(by gateway: VirtualDevice, replacing target: String) async {
        defer { gateway.transferEnded() }
        guard let connection = connectionOf[gateway.id] else { return }
        let targetName = deviceById[target]?.plan.name
        let failAfter = gateway.drawTransferFailure(rate: options.failureRate)
        let stages: [TransferStatus] = [.deviceConfigInit, .deviceDataInit, .osConfigInit]
        for (number, stage) in stages.enumerated() {
            do { try await Task.sleep(for: .seconds(options.transferStep)) } catch { return }
            await connection.publish(gateway.transferStatus(target: target, targetName: targetName, stage,
                                                            now: Timestamp.current))
            if failAfter == number + 1 {
                do { try await Task.sleep(for: .seconds(options.transferStep)) } catch { return }
                await connection.publish(gateway.transferStatus(target: target, targetName: targetName, .failed,
                                                                failedCode: "\(stage)_failed", now: Timestamp.current))
                return
            }
        }
        do { try await Task.sleep(for: .seconds(options.transferStep)) } catch { return }
        await connection.publish(gateway.transferStatus(target: target, targetName: targetName, .finish,
                                                        now: Timestamp.current))
        var moved = 0
        for device in devices where device.gatewayId == target {
            guard let link = connectionOf[device.id] else { continue }
            await link.publish(device.moved(to: gateway.id, now: Timestamp.current))
            moved += 1
        }
        // Both gateways report how many sub-devices they now serve.
        for (side, delta) in [(gateway, moved), (deviceById[target], -moved)] {
            guard let side, let link = connectionOf[side.id], let count = side.value("sub_device_count")?.int64Value,
                  let report = side.report("sub_device_count", .integer(max(0, count + Int64(delta))),
                                           now: Timestamp.current) else { continue }
            await link.publish(report)
        }
    }

    /// Every device publishes its offline status (a clean DISCONNECT drops the will), then the connections close.
    /// An Alink or TuyaLink device publishes none (it has no status); such a gateway logs its sub-devices out.
    private func stop() async {
        for run in transfers.withLock({ Array($0.values) }) { run.cancel() }
        await withTaskGroup(of: Void.self) { group in
            for connection in connections {
                group.addTask {
                    let attached = connection.attached
                    for device in attached {
                        if device.plan.dialect == .native {
                            await connection.publish(device.status(online: false, now: Timestamp.current))
                        } else if device.plan.category == .gateway {
                            let subs = attached.filter { $0.plan.gatewayId == device.id }
                            if !subs.isEmpty {
                                await connection.publish(device.plan.dialect == .alink ? device.alinkLogout(subs)
                                    : device.tuyaLinkLogout(subs.map(\.id), now: Timestamp.current))
                            }
                        }
                        self.stats.online.subtract(1, ordering: .relaxed)
                    }
                    await connection.client.disconnect()
                }
            }
        }
    }

    private func printProgress() async {
        let started = ContinuousClock.now
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(10)) } catch { return }
            Console.out("simulate: +\((ContinuousClock.now - started).components.seconds) s  \(stats.line)")
        }
    }

    static func mqtt(_ configuration: AgentConfiguration, clientID: String, will: MQTTWill?) -> MQTTConfiguration {
        var mqtt = MQTTConfiguration(brokers: configuration.mqtt.brokers, clientID: clientID)
        mqtt.username = configuration.mqtt.username
        mqtt.password = configuration.mqtt.password
        if configuration.mqtt.caFile != nil || configuration.mqtt.certFile != nil || configuration.mqtt.keyFile != nil
            || !configuration.mqtt.verifyHostname {
            mqtt.tls = MQTTTLS(caFile: configuration.mqtt.caFile, certFile: configuration.mqtt.certFile,
                               keyFile: configuration.mqtt.keyFile, verifyHostname: configuration.mqtt.verifyHostname)
        }
        mqtt.keepAlive = Int(configuration.mqtt.keepAlive)
        mqtt.will = will
        return mqtt
    }
}

/// Which Alink gateways have logged their sub-devices in: a sub-device waits for its gateway's login before it speaks.
final class GatewaySessions: Sendable {
    private let state = Mutex<(open: Set<String>, waiting: [String: [CheckedContinuation<Void, Never>]])>(([], [:]))

    func loggedIn(_ gateway: String) {
        let waiting = state.withLock { state in
            state.open.insert(gateway)
            return state.waiting.removeValue(forKey: gateway) ?? []
        }
        for waiter in waiting { waiter.resume() }
    }

    /// Returns once `gateway` logged its sub-devices in, or at once when the calling task is cancelled.
    func waitForLogin(_ gateway: String) async {
        let key = gateway
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.open.contains(key) || Task.isCancelled { return true }
                    state.waiting[key, default: []].append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            // Every waiter of this gateway goes: each checks its own cancellation afterwards.
            let waiting = state.withLock { $0.waiting.removeValue(forKey: key) ?? [] }
            for waiter in waiting { waiter.resume() }
        }
    }
}
