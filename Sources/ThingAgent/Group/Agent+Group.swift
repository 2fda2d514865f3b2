import FoundationEssentials
import JSON
import MQTT
import ThingAgentCore

/// A daemon in a group (`agentGroup`): its lease and its records as parts of the agent, what a takeover does, and
/// which records a change of the active instance makes (docs/architecture.md, "Standby instances").
extension Agent {
    /// The group's parts: the lease (claimed, held, renewed) and the records (published and applied).
    func groupParts() -> [Part] {
        guard let lease, let replica else { return [] }
        return [
            Part(name: "group lease") {
                await lease.run(client: self.client) { active in await self.roleChanged(active: active) }
            },
            Part(name: "group records") { await replica.run(self) },
        ]
    }

    /// After a change of role: the announcement says it; a new active instance answers the API requests it held
    /// that the lost one left unanswered, and its links send from now on.
    private func roleChanged(active: Bool) async {
        try? await client.publish(configuration.announceTopic, payload: Self.announcement(online: true, standing),
                                  qos: .atLeastOnce, retain: true)
        guard active else { return }
        let released = apiQueue?.release() ?? 0
        if released > 0 {
            logger.info("answering the API requests the lost active instance left unanswered", metadata: [
                "requests": "\(released)"])
        }
    }

    /// The records that carry a local change to the standbys: each key it touched, with its value now.
    func records(for change: LocalChange) throws -> [GroupReplica.Record] {
        let local = try requireLocal()
        switch change {
        case .edit(let device, _):
            return [GroupReplica.Record(kind: .meta, key: device, value: .object(try local.metadata(device).json))]
        case .createGroup(let name, _), .deleteGroup(let name), .addToGroup(let name, _), .removeFromGroup(let name, _):
            return [GroupReplica.Record(kind: .group, key: name, value: try local.group(named: name)?.json)]
        case .addNetwork(let device, _), .removeNetwork(let device, _):
            return [GroupReplica.Record(kind: .networks, key: device,
                                        value: .array(try local.backupNetworks(device).map(\.record)))]
        case .createScene(let scene), .updateScene(let scene):
            return [GroupReplica.Record(kind: .scene, key: scene.name, value: try local.scene(named: scene.name)?.json)]
        case .deleteScene(let name):
            return [GroupReplica.Record(kind: .scene, key: name, value: try local.scene(named: name)?.json)]
        case .createLink(let link):
            return [GroupReplica.Record(kind: .link, key: link.name, value: try local.link(named: link.name)?.json)]
        case .deleteLink(let name):
            return [GroupReplica.Record(kind: .link, key: name, value: try local.link(named: name)?.json)]
        }
    }

    /// The records of a removed device: its own keys deleted, and the groups, scenes and links it left as they now are.
    func records(for removal: DeviceRemoval) throws -> [GroupReplica.Record] {
        let local = try requireLocal()
        let device = removal.device
        var records = [GroupReplica.Record(kind: .meta, key: device, value: nil),
                       GroupReplica.Record(kind: .networks, key: device, value: nil),
                       GroupReplica.Record(kind: .upgrade, key: device, value: nil)]
        for name in removal.groups {
            records.append(GroupReplica.Record(kind: .group, key: name, value: try local.group(named: name)?.json))
        }
        for name in removal.scenes + removal.deletedScenes {
            records.append(GroupReplica.Record(kind: .scene, key: name, value: try local.scene(named: name)?.json))
        }
        for name in removal.links + removal.deletedLinks {
            records.append(GroupReplica.Record(kind: .link, key: name, value: try local.link(named: name)?.json))
        }
        return records
    }

    /// Sends `records` to the standbys when this is the active instance of a group (nothing otherwise).
    func replicate(_ records: @autoclosure () throws -> [GroupReplica.Record]) {
        guard let replica, standing.isActive else { return }
        do {
            replica.publish(try records())
        } catch {
            logger.error("could not read a change for the group's standbys", metadata: ["error": "\(error)"])
        }
    }

    /// Waits until the broker has every record sent so far, so that an answer says a change the standbys will
    /// have (true at once without a group). Bounded by `requestTimeout`.
    func replicated() async -> Bool {
        guard let replica, standing.isActive else { return true }
        return await replica.flushed(timeout: configuration.requestTimeout)
    }

    /// The transfer record of `gateway` for the standbys: the start accepted here and the transfer as cached.
    func replicateTransfer(_ gateway: String) {
        replicate([ReplicaWatch.transferRecord(gateway, writer: writer)])
    }

    /// The group's line of `statusLine`: this instance's role and since when, and who holds the lease.
    var groupStatus: String? {
        guard let group = standing.group else { return nil }
        let since = Date(timeIntervalSince1970: Double(standing.since) / 1000).formatted(.iso8601)
        if standing.isActive { return "active in group \(group) since \(since)" }
        return "standby in group \(group) since \(since) (active: \(standing.holder ?? "none heard"))"
    }

    /// The health check's part: the group, this instance's role, since when, and the members heard.
    var groupJSON: JSONObject? {
        guard let group = standing.group else { return nil }
        let members = standing.members.map { member -> JSONValue in
            .object(JSONObject([("instance", .string(member.instance)), ("online", .bool(member.online)),
                                ("role", member.role.map(JSONValue.string) ?? .null),
                                ("since", member.since.map(JSONValue.integer) ?? .null)]))
        }
        return JSONObject([("name", .string(group)), ("instance", .string(standing.instance)),
                           ("role", .string(standing.role)), ("since", .integer(standing.since)),
                           ("active", standing.holder.map(JSONValue.string) ?? .null),
                           ("failoverTimeout", .double(configuration.group.failoverTimeout.seconds)),
                           ("members", .array(members))])
    }
}

/// Hears the writer's upgrade and transfer changes and, on the active instance of a group, sends them to the
/// standbys. A standby takes them by the rules of `CacheWriter.adoptUpgrade` and `adoptTransfer`, which let the
/// device's own reports (heard by every instance) and the active's verdicts meet without going back.
final class ReplicaWatch: CacheWatch {
    let replica: GroupReplica
    let standing: Standing
    let writer: CacheWriter

    init(replica: GroupReplica, standing: Standing, writer: CacheWriter) {
        self.replica = replica
        self.standing = standing
        self.writer = writer
    }

    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        guard changes.transfer != nil, standing.isActive else { return }
        replica.publish([Self.transferRecord(device, writer: writer)])
    }

    func removed(_ device: String) {}

    func upgradeChanged(_ upgrade: OTAUpgrade) {
        guard standing.isActive else { return }
        replica.publish([GroupReplica.Record(kind: .upgrade, key: upgrade.deviceId, value: upgrade.record)])
    }

    static func transferRecord(_ gateway: String, writer: CacheWriter) -> GroupReplica.Record {
        let info = writer.cache.device(gateway)?.transfer
        // A stall verdict ends the start here right after the change is heard: the record says so at once.
        let judged = info?.status == .failed && info?.failedCode == CacheWriter.stallFailedCode
        let accepted = (judged ? nil : writer.acceptedTarget(gateway: gateway)).map { target -> JSONValue in
            .object(JSONObject([("target", .string(target)), ("at", .integer(Timestamp.now()))]))
        }
        return GroupReplica.Record(kind: .transfer, key: gateway, value: .object(JSONObject([
            ("accepted", accepted ?? .null), ("info", info?.record ?? .null)])))
    }
}
