import MQTT
import Synchronization
import ThingAgent

/// One broker connection of the simulator: a device's own, with the device's will, or one that carries several
/// devices (a gateway and its sub-devices, or a pool beyond the connection limit) and routes their requests.
final class SimulatorConnection: Sendable {
    let client: MQTTClient
    let topics: Topics
    private let devices = Mutex<[String: VirtualDevice]>([:])
    private let stats: SimulatorStats

    init(configuration: MQTTConfiguration, topics: Topics, stats: SimulatorStats) throws {
        client = try MQTTClient(configuration: configuration)
        self.topics = topics
        self.stats = stats
    }

    /// Connects (at once when already connected) and subscribes to the requests `device` answers.
    func attach(_ device: VirtualDevice) async throws {
        devices.withLock { $0[device.id] = device }
        try await client.connect()
        if device.plan.dialect == .alink {
            // What the platform sends it (a gateway: also its topology's and sessions' replies).
            let filters = AlinkTopics.filters(of: device.id, gateway: device.plan.category == .gateway, publisher: .agent)
            try await client.subscribe(filters.map { ($0, QoS.atLeastOnce) })
            return
        }
        if device.plan.dialect == .tuyalink {
            // Its own downlinks (a gateway: also its binds' and topology's answers). Tuya's broker subscribes them
            // for the device; a plain broker needs the device to.
            let filters = TuyaLinkTopics.filters(of: device.id, gateway: device.plan.category == .gateway,
                                                 publisher: .agent)
            try await client.subscribe(filters.map { ($0, QoS.atLeastOnce) })
            return
        }
        var requests: [RequestKind] = [.setProperties, .getInfo, .otaStart, .action]
        if device.plan.abilities.contains(.wifiList) { requests.append(.wifiScan) }
        if device.plan.abilities.contains(.gatewayTransfer) { requests.append(.gatewayTransferStart) }
        try await client.subscribe(requests.map { (topics.request($0, device: device.id), QoS.atLeastOnce) })
    }

    var attached: [VirtualDevice] { devices.withLock { Array($0.values) }.sorted { $0.id < $1.id } }

    func publish(_ publication: Publication) async {
        do {
            try await client.publish(publication.topic, payload: publication.payload, qos: publication.qos,
                                     retain: publication.retain)
            stats.published.add(1, ordering: .relaxed)
        } catch {
            stats.failed.add(1, ordering: .relaxed)
        }
    }

    /// Answers requests in arrival order until the connection stops; `react` hears what each one started.
    func serve(react: @Sendable (VirtualDevice, VirtualDevice.Reaction) async -> Void) async {
        for await message in client.messages {
            let reaction: VirtualDevice.Reaction
            let device: VirtualDevice
            if let (deviceId, request) = parse(message.topic), let found = devices.withLock({ $0[deviceId] }) {
                device = found
                reaction = device.handle(request, payload: message.payload, now: Timestamp.current)
            } else if let (deviceId, downlink) = AlinkDownlink.parse(message.topic),
                      let found = devices.withLock({ $0[deviceId] }), found.plan.dialect == .alink {
                device = found
                reaction = device.handleAlink(downlink, payload: message.payload, now: Timestamp.current)
            } else if let (deviceId, downlink) = TuyaLinkDownlink.parse(message.topic),
                      let found = devices.withLock({ $0[deviceId] }), found.plan.dialect == .tuyalink {
                device = found
                reaction = device.handleTuyaLink(downlink, payload: message.payload, now: Timestamp.current)
            } else {
                continue
            }
            for publication in reaction.publications { await publish(publication) }
            if !reaction.publications.isEmpty { stats.answered.add(1, ordering: .relaxed) }
            await react(device, reaction)
        }
    }

    /// `R/D/thing/<request>` to the device and request.
    private func parse(_ topic: String) -> (String, RequestKind)? {
        guard topic.hasPrefix(topics.root + "/") else { return nil }
        let rest = topic.dropFirst(topics.root.count + 1)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        let suffix = rest[rest.index(after: slash)...]
        guard suffix.hasPrefix("thing/"), let request = RequestKind(rawValue: String(suffix.dropFirst(6))) else {
            return nil
        }
        return (String(rest[..<slash]), request)
    }
}

/// What the simulator did, for its progress lines.
final class SimulatorStats: Sendable {
    let online = Atomic<Int>(0)
    let published = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let transfers = Atomic<Int>(0)
    let upgrades = Atomic<Int>(0)

    var line: String {
        "\(online.load(ordering: .relaxed)) devices online, \(published.load(ordering: .relaxed)) messages sent"
            + " (\(failed.load(ordering: .relaxed)) failed), \(answered.load(ordering: .relaxed)) requests answered,"
            + " \(transfers.load(ordering: .relaxed)) gateway transfers, \(upgrades.load(ordering: .relaxed)) firmware upgrades"
    }
}
