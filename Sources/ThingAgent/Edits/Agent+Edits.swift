import JSON
import MQTT
import ThingAgentCore

extension DeviceMetadata {
    public var json: JSONObject {
        JSONObject([
            ("name", name.map(JSONValue.string) ?? .null), ("room", room.map(JSONValue.string) ?? .null),
            ("icon", icon.map(JSONValue.string) ?? .null), ("offlineWarning", .bool(offlineWarning)),
            ("metaUpdatedAt", updatedAt.map(JSONValue.integer) ?? .null),
        ])
    }

    /// The metadata from its `json` form (an API answer); nil when it is not one.
    public init?(json: JSONValue) {
        guard let object = json.objectValue, let warning = object["offlineWarning"]?.boolValue else { return nil }
        self.init(name: object["name"]?.stringValue, room: object["room"]?.stringValue, icon: object["icon"]?.stringValue,
                  offlineWarning: warning, updatedAt: object["metaUpdatedAt"]?.int64Value)
    }
}

extension DeviceSnapshot {
    /// `json(now:)` with the local metadata: `name` is the local name when one is set (the reported one is kept
    /// as `reportedName`), then `room`, `icon` and `offlineWarning`.
    public func json(now: Millis, metadata: DeviceMetadata?) -> JSONObject {
        var object = json(now: now)
        let meta = metadata ?? DeviceMetadata()
        if let name = meta.name { object["name"] = .string(name) }
        object["reportedName"] = info.name.map(JSONValue.string) ?? .null
        object["room"] = meta.room.map(JSONValue.string) ?? .null
        object["icon"] = meta.icon.map(JSONValue.string) ?? .null
        object["offlineWarning"] = .bool(meta.offlineWarning)
        return object
    }

    /// The name to show: the local one, else the reported one.
    public func displayName(_ metadata: DeviceMetadata?) -> String? {
        metadata?.name ?? info.name
    }
}

extension Agent {
    /// The local store, or an error saying why there is none (a `watch` agent without a cache file).
    func requireLocal() throws -> LocalStore {
        guard let local else { throw EditError.invalid("this agent has no cache file to keep edits in") }
        return local
    }

    /// The device's local metadata (read from SQLite: an edit by another process shows at once).
    public func metadata(_ deviceId: String) throws -> DeviceMetadata {
        try requireLocal().metadata(deviceId)
    }

    /// Renames, moves (room), re-icons a device or switches its offline warning. Only known devices.
    @discardableResult
    public func edit(_ deviceId: String, _ edit: DeviceEdit) throws -> DeviceMetadata {
        guard cache.device(deviceId) != nil else { throw EditError.unknownDevice(deviceId) }
        let metadata = try requireLocal().edit(deviceId, edit)
        homeAssistant?.mark(deviceId)
        return metadata
    }

    @discardableResult
    public func rename(_ deviceId: String, to name: String) throws -> DeviceMetadata {
        try edit(deviceId, DeviceEdit(name: name))
    }

    /// Every device group with its members (groups change through `apply(.createGroup(...))` and the like).
    public func groups() throws -> [DeviceGroup] {
        try requireLocal().groups()
    }

    /// A device's backup Wi-Fi networks, highest priority first (changed through `apply(.addNetwork(...))`).
    public func backupNetworks(_ deviceId: String) throws -> [BackupNetwork] {
        try requireLocal().backupNetworks(deviceId)
    }

    /// Removes a device: clears its retained status and info on the broker, publishes the unbind request
    /// (`R/D/thing/unbind`, `{"msgId","time"}`, QoS 1), and drops it from the cache (memory and SQLite, with its
    /// local metadata, group memberships, scene actions, link memberships and backup networks; a scene left with
    /// no action and a link left with one member are deleted, and the daemon's links follow at once). Returns
    /// what it was taken out of. With provisioning on, its broker client and role
    /// are deleted (a sub-device's topics leave its gateway's role) before this returns. A daemon on the same broker hears the unbind and
    /// drops it from its memory too. A later message from the device makes it known again.
    ///
    /// Needs the broker (throws `RequestError.notSent` without it, and removes nothing).
    @discardableResult
    public func removeDevice(_ deviceId: String) async throws -> DeviceRemoval {
        guard DeviceID.isValid(deviceId) else { throw EditError.invalid("'\(deviceId)' is not a device id") }
        guard let removed = cache.device(deviceId) else { throw EditError.unknownDevice(deviceId) }
        guard client.state == .connected else {
            throw RequestError.notSent(reason: "not connected to the broker; nothing was removed")
        }
        let standInAccess = await standInAccessForRemoval()
        do throws(MQTTError) {
            for topic in [topics.status(deviceId), topics.info(deviceId)] {
                try await client.publish(topic, payload: [], qos: .atLeastOnce, retain: true)
            }
            let unbind = JSONObject([("msgId", .string("u\(Timestamp.now())")), ("time", .integer(Timestamp.now()))])
            try await client.publish(topics.unbind(deviceId), payload: JSONValue.object(unbind).serializedBytes(),
                                     qos: .atLeastOnce)
        } catch {
            await standInAccess?.dynsec?.disconnect()
            throw RequestError.notSent(reason: "\(error)")
        }
        var removal = try local?.references(of: deviceId) ?? DeviceRemoval(device: deviceId)
        try writer.remove(deviceId, now: Timestamp.now())
        // At once rather than at the flusher's next batch: the CLI exits right after.
        try writer.flush()
        replicate(try records(for: removal))
        // With provisioning, the device's broker client goes too: it can no longer connect, so it cannot come back.
        if let provisioning {
            try await provisioning.access.sync()
            removal.brokerCredentials = .deleted
        } else if let standInAccess {
            removal.brokerCredentials = await standInAccess.removeAsStandIn()
        }
        // A sub-device never had credentials of its own (its gateway's role reached its topics): say that, not
        // that they were deleted.
        if removal.brokerCredentials == .deleted, let gateway = removed.info.gatewayId {
            removal.brokerCredentials = .noneOfItsOwn(gateway: gateway)
        }
        return removal
    }

    /// A stand-in's removal with provisioning configured: the daemon's access manager on the command's own
    /// connection, read in line with the broker before the removal so that the sync after it deletes the
    /// device's client and role as the daemon's would. Nil when provisioning is off or this is the daemon.
    private func standInAccessForRemoval() async -> StandInAccess? {
        guard isStandIn, configuration.provisioning.enabled else { return nil }
        do {
            let provisioning = try Self.makeProvisioning(configuration, cache: cache, logger: logger,
                                                         clientID: configuration.commandClientID,
                                                         timeout: min(configuration.requestTimeout, .seconds(10)))
            do {
                try await provisioning.access.prepareAsStandIn()
            } catch {
                await provisioning.access.dynsec.disconnect()
                throw error
            }
            return StandInAccess(access: provisioning.access)
        } catch {
            logger.warning("cannot administer the broker's access: the removed device's credentials go at the "
                           + "daemon's next start", metadata: ["error": "\(error)"])
            return StandInAccess(failure: "\(error)")
        }
    }
}

/// The broker access a stand-in's removal uses, or why it has none.
struct StandInAccess {
    var access: AccessManager?
    var failure: String?

    init(access: AccessManager) { self.access = access }
    init(failure: String) { self.failure = failure }

    var dynsec: DynsecClient? { access?.dynsec }

    func removeAsStandIn() async -> DeviceRemoval.BrokerCredentials {
        guard let access else { return .leftForTheDaemon(failure ?? "no access") }
        let outcome: DeviceRemoval.BrokerCredentials
        do {
            try await access.sync()
            outcome = .deleted
        } catch {
            outcome = .leftForTheDaemon("\(error)")
        }
        await access.dynsec.disconnect()
        return outcome
    }
}
