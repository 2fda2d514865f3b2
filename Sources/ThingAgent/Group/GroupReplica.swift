import FoundationEssentials
import JSON
import MQTT
import Platform
import Synchronization
import ThingAgentCore

/// What only the active instance of a group writes, carried to the standbys through the broker
/// (docs/architecture.md, "Standby instances"): the local tables (names, rooms, icons, groups, backup networks,
/// scenes, links) and the upgrades and gateway transfers it started or judged.
///
/// One retained QoS 1 record per key, `thing-agent/groups/<group>/state/<kind>/<key>`, holding the key's whole
/// value (`{"origin","run","seq","time","value"}`, or `"deleted": true`): the broker keeps the latest of each, a
/// standby that was away gets what changed from its persistent session or, subscribing anew, every key's latest.
/// Each instance applies every record, its own echoes too (except one overtaken by a later change of its own), in
/// the broker's order: two instances that both wrote a key (only while a partition gave both the lease) end with
/// the value the broker kept last.
///
/// `accept` runs on the network thread and only queues; `run`, a part of the agent, publishes and applies in order.
final class GroupReplica: Sendable {
    let group: String
    let instance: String
    let prefix: String
    /// This run of the instance: records of an earlier run are applied like any other's.
    private let run = UInt64.random(in: 1...UInt64.max)
    private let logger: AgentLogger

    /// The kinds of record, each naming one key of the state.
    enum Kind: String, CaseIterable, Sendable {
        case meta, networks, group, scene, link, upgrade, transfer

        /// Whether the key is a device id (a topic level as it is) or a name (hex in the topic).
        var keyedByDevice: Bool { [.meta, .networks, .upgrade, .transfer].contains(self) }
    }

    struct Record: Sendable {
        var kind: Kind
        var key: String
        /// nil: the key is deleted.
        var value: JSONValue?
    }

    private struct Outgoing: Sendable {
        var topic: String
        var payload: [UInt8]
        var done: (@Sendable (Bool) -> Void)?
    }

    private let outgoing: AsyncStream<Outgoing>
    private let outgoingInput: AsyncStream<Outgoing>.Continuation
    private let incoming: AsyncStream<MQTTMessage>
    private let incomingInput: AsyncStream<MQTTMessage>.Continuation
    /// Per topic, the sequence number of this run's latest record: an echo of an earlier one is not applied.
    private let latestOwn = Mutex<(next: UInt64, byTopic: [String: UInt64])>((1, [:]))
    private let applied = Atomic<Int>(0), published = Atomic<Int>(0)

    init(group: String, instance: String, logger: AgentLogger) {
        self.group = group
        self.instance = instance
        self.logger = logger
        prefix = "thing-agent/groups/\(group)/state/"
        (outgoing, outgoingInput) = AsyncStream.makeStream()
        (incoming, incomingInput) = AsyncStream.makeStream()
    }

    var filter: String { prefix + "#" }

    /// Records applied here, and published here (the metrics).
    var counts: (applied: Int, published: Int) {
        (applied.load(ordering: .relaxed), published.load(ordering: .relaxed))
    }

    func topic(_ kind: Kind, _ key: String) -> String {
        prefix + kind.rawValue + "/" + (kind.keyedByDevice ? key : key.utf8.map { $0.hex(width: 2) }.joined())
    }

    // MARK: the active side

    /// Queues records for the broker; `done` is told (true: acknowledged) once the last of them is.
    func publish(_ records: [Record], done: (@Sendable (Bool) -> Void)? = nil) {
        guard !records.isEmpty else {
            done?(true)
            return
        }
        for (index, record) in records.enumerated() {
            let topic = topic(record.kind, record.key)
            let seq = latestOwn.withLock { own in
                defer { own.next += 1 }
                own.byTopic[topic] = own.next
                return own.next
            }
            var object = JSONObject([("origin", .string(instance)), ("run", .string(String(run))),
                                     ("seq", .integer(Int64(seq))), ("time", .integer(Timestamp.now())),
                                     ("key", .string(record.key))])
            if let value = record.value { object["value"] = value } else { object["deleted"] = .bool(true) }
            outgoingInput.yield(Outgoing(topic: topic, payload: JSONValue.object(object).serializedBytes(),
                                         done: index == records.count - 1 ? done : nil))
        }
    }

    /// Publishes the records and waits until the broker has the last of them (false: not within `timeout`).
    func publishAndWait(_ records: [Record], timeout: Duration) async -> Bool {
        let (stream, input) = AsyncStream.makeStream(of: Bool.self)
        publish(records) { ok in
            input.yield(ok)
            input.finish()
        }
        return await Self.first(of: stream, within: timeout)
    }

    /// Waits until the broker has every record queued so far (false: one failed, or not within `timeout`).
    func flushed(timeout: Duration) async -> Bool {
        let (stream, input) = AsyncStream.makeStream(of: Bool.self)
        outgoingInput.yield(Outgoing(topic: "", payload: [], done: { ok in
            input.yield(ok)
            input.finish()
        }))
        return await Self.first(of: stream, within: timeout)
    }

    private static func first(of stream: AsyncStream<Bool>, within timeout: Duration) async -> Bool {
        await withTimeout(timeout) { () async -> Bool in
            for await ok in stream { return ok }
            return false
        }
    }

    // MARK: the receive path

    /// Queues the group's records for `run` (network thread); false for other topics.
    func accept(_ message: MQTTMessage) -> Bool {
        guard message.topic.hasPrefix(prefix) else { return false }
        incomingInput.yield(message)
        return true
    }

    // MARK: the part

    /// Publishes what is queued and applies what comes, each in order, until cancelled.
    func run(_ agent: Agent) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                // Whether every record since the last marker reached the broker (a marker has no topic).
                var allSince = true
                for await message in self.outgoing {
                    if message.topic.isEmpty {
                        message.done?(allSince)
                        allSince = true
                        continue
                    }
                    var ok = false
                    do {
                        try await agent.client.publish(message.topic, payload: message.payload, qos: .atLeastOnce,
                                                       retain: true)
                        ok = true
                        self.published.add(1, ordering: .relaxed)
                    } catch {
                        self.logger.warning("could not publish a record for the group's standbys", metadata: [
                            "topic": message.topic, "error": "\(error)"])
                    }
                    allSince = allSince && ok
                    message.done?(ok)
                    if Task.isCancelled { return }
                }
            }
            group.addTask {
                for await message in self.incoming {
                    self.apply(message, agent)
                    if Task.isCancelled { return }
                }
            }
        }
    }

    func finish() {
        outgoingInput.finish()
        incomingInput.finish()
    }

    private func apply(_ message: MQTTMessage, _ agent: Agent) {
        let rest = message.topic.dropFirst(prefix.count)
        guard let slash = rest.firstIndex(of: "/"), let kind = Kind(rawValue: String(rest[..<slash])),
              let object = (try? JSONParser.parse(message.payload))?.objectValue,
              let key = object["key"]?.stringValue, topic(kind, key) == message.topic else {
            if !message.payload.isEmpty {
                logger.warning("ignored a record of the group that is not one", metadata: ["topic": message.topic])
            }
            return
        }
        if object["origin"]?.stringValue == instance, object["run"]?.stringValue == String(run) {
            let seq = UInt64(clamping: object["seq"]?.int64Value ?? 0)
            let latest = latestOwn.withLock { $0.byTopic[message.topic] }
            if let latest, seq < latest { return }
        }
        let value = object["deleted"]?.boolValue == true ? nil : object["value"]
        do {
            try apply(Record(kind: kind, key: key, value: value), agent)
            applied.add(1, ordering: .relaxed)
        } catch {
            logger.error("could not apply a record of the group", metadata: [
                "topic": message.topic, "error": "\(error)"])
        }
    }

    /// Sets the key to the record's value in this instance's cache file.
    func apply(_ record: Record, _ agent: Agent) throws {
        let local = try agent.requireLocal()
        let value = record.value
        switch record.kind {
        case .meta:
            try local.setMetadata(record.key, value.flatMap(DeviceMetadata.init(json:)))
        case .networks:
            try local.setBackupNetworks(record.key, value?.arrayValue?.compactMap(BackupNetwork.init(record:)) ?? [])
        case .group:
            try local.setGroup(record.key, value.flatMap(DeviceGroup.init(json:)))
        case .scene:
            try local.setScene(record.key, try value.map { try Scene(json: $0) })
        case .link:
            try agent.writer.flush()
            try local.setLink(record.key, try value.map { try DeviceLink(json: $0) })
            agent.linkEngine.load(try local.links())
        case .upgrade:
            try agent.writer.adoptUpgrade(device: record.key, value.flatMap(OTAUpgrade.init(record:)))
        case .transfer:
            let accepted = value?["accepted"].flatMap { accepted -> (target: String, at: Millis)? in
                guard let target = accepted["target"]?.stringValue else { return nil }
                return (target, accepted["at"]?.int64Value ?? 0)
            }
            let info = value?["info"].flatMap(TransferInfo.init(record:))
            try agent.writer.adoptTransfer(gateway: record.key, accepted: accepted, info: info,
                                           topic: agent.topics.transferStatus(record.key), now: Timestamp.now())
        }
    }
}

// MARK: the records' values

extension BackupNetwork {
    /// With the password: the standbys' copy must be whole (the group's topics are the agent's alone).
    var record: JSONValue {
        .object(JSONObject([("ssid", .string(ssid)), ("password", password.map(JSONValue.string) ?? .null),
                            ("priority", .integer(Int64(priority))), ("addedAt", .integer(addedAt))]))
    }

    init?(record: JSONValue) {
        guard let ssid = record["ssid"]?.stringValue else { return nil }
        self.init(ssid: ssid, password: record["password"]?.stringValue,
                  priority: Int(record["priority"]?.int64Value ?? 0), addedAt: record["addedAt"]?.int64Value ?? 0)
    }
}

extension OTAUpgrade {
    /// Every field, as the cache keeps it.
    var record: JSONValue {
        var object = json
        object["sha256"] = .string(image.sha256)
        object["size"] = image.size.map(JSONValue.integer) ?? .null
        object["reportTime"] = .integer(reportTime)
        return .object(object)
    }

    init?(record: JSONValue) {
        guard let device = record["devId"]?.stringValue, let version = record["version"]?.stringValue,
              let url = record["url"]?.stringValue, let sha256 = record["sha256"]?.stringValue,
              let stage = record["stage"]?.stringValue.flatMap(OTAStage.init(rawValue:)) else { return nil }
        self.init(deviceId: device, fromVersion: record["fromVersion"]?.stringValue,
                  image: FirmwareCatalog.Image(version: version, url: url, sha256: sha256, size: record["size"]?.int64Value),
                  stage: stage, progress: Int(record["progress"]?.int64Value ?? 0),
                  failedCode: record["failedCode"]?.stringValue ?? "", startedAt: record["startedAt"]?.int64Value ?? 0,
                  updatedAt: record["updatedAt"]?.int64Value ?? 0, reportTime: record["reportTime"]?.int64Value ?? 0,
                  endedAt: record["endedAt"]?.int64Value)
    }
}

extension TransferInfo {
    var record: JSONValue {
        .object(JSONObject([("sourceDeviceId", .string(sourceDeviceId)),
                            ("targetDeviceId", targetDeviceId.map(JSONValue.string) ?? .null),
                            ("targetDeviceName", targetDeviceName.map(JSONValue.string) ?? .null),
                            ("status", .integer(Int64(status.rawValue))), ("failedCode", .string(failedCode)),
                            ("time", .integer(time)), ("updatedAt", .integer(updatedAt))]))
    }

    init?(record: JSONValue) {
        guard let source = record["sourceDeviceId"]?.stringValue,
              let status = record["status"]?.int64Value.flatMap({ TransferStatus(rawValue: Int($0)) }) else { return nil }
        self.init(sourceDeviceId: source, targetDeviceId: record["targetDeviceId"]?.stringValue,
                  targetDeviceName: record["targetDeviceName"]?.stringValue, status: status,
                  failedCode: record["failedCode"]?.stringValue ?? "", time: record["time"]?.int64Value ?? 0,
                  updatedAt: record["updatedAt"]?.int64Value ?? 0)
    }
}
