import FoundationEssentials
import MQTT
import ThingAgentCore

/// How `Agent.init` puts an agent together, one step a function, in the order the steps depend on each other. Each
/// step asks the role what it is for (`Role.writesCache`, `Role.speaksForTheFleet`).
extension Agent {
    /// The cache file as the role opens it, with what the rest is made from.
    struct OpenedCache {
        /// Held for the agent's life when the role writes and `lockCache` asked for it.
        let lock: CacheLock?
        /// Nil for an observer: it writes nothing.
        let store: CacheStore?
        let cache: DeviceCache
        let local: LocalStore?
        /// The upgrades the file records (the daemon follows those a restart interrupted).
        let upgrades: [OTAUpgrade]
    }

    /// Takes the lock (when asked), opens the file and loads the fleet into memory. An observer reads what exists
    /// and creates nothing.
    static func openCache(_ configuration: AgentConfiguration, role: Role, logger: AgentLogger, lockCache: Bool,
                          shouldStop: @escaping @Sendable () -> Bool) throws -> OpenedCache {
        let database = configuration.cache.database
        guard role.writesCache else {
            let existing = FileManager.default.fileExists(atPath: database)
            return OpenedCache(
                lock: nil, store: nil,
                cache: DeviceCache(existing ? try CacheStore(path: database, readOnly: true).loadAll() : [:]),
                local: existing ? try? LocalStore(path: database, readOnly: true) : nil, upgrades: [])
        }
        let lock: CacheLock?
        let store: CacheStore
        if lockCache {
            (lock, store) = try CacheLock.lockThenOpen(
                cache: database, holder: .daemon(clientID: configuration.mqtt.clientID), commandWait: commandLockWait,
                waiting: { held in
                    logger.notice("a command holds the cache while no daemon runs: waiting for it", metadata: [
                        "pid": held.holder.map { "\($0)" } ?? "?", "lock": held.lockFile,
                        "holder": "\(held)", "atMost": "\(Int(commandLockWait.seconds)) s"])
                }, shouldStop: shouldStop) { try CacheStore(path: database) }
        } else {
            (lock, store) = (nil, try CacheStore(path: database))
        }
        let cache = DeviceCache(try store.loadAll(shouldStop: shouldStop))
        return OpenedCache(lock: lock, store: store, cache: cache, local: try LocalStore(path: database),
                           upgrades: try OTAUpgrades.read(store.database))
    }

    /// The one way memory changes: with a journal and the storage monitor's status file where the role writes.
    /// Not "-journal": that name is SQLite's own rollback journal, which SQLite would try to roll back.
    static func makeWriter(_ configuration: AgentConfiguration, role: Role, store: sending CacheStore?,
                           cache: DeviceCache, hub: EventHub, models: CurrentModels,
                           logger: AgentLogger) throws -> CacheWriter {
        let journal = role.writesCache
            ? try Journal(path: configuration.cache.database + ".journal", initialCapacity: try journalSize()) : nil
        let storage = role.writesCache
            ? StorageMonitor(logger: logger, statusFile: StorageStatusFile(path: configuration.cache.database + ".storage"))
            : StorageMonitor()
        if role.writesCache, PrivateFiles.isReadableByOthers(configuration.cache.database) {
            logger.warning("the cache file is readable by other users, and it holds backup Wi-Fi passwords; "
                           + "chmod 600 it (the agent creates its files 0600)", metadata: ["file": configuration.cache.database])
        }
        return CacheWriter(store: store, journal: journal, cache: cache, hub: hub, storage: storage,
                           maxProperties: configuration.cache.maxPropertiesPerDevice,
                           trustsForeignTransfers: configuration.trustForeignTransfers, models: models)
    }

    /// What reacts to what the writer applied, whoever caused it: offline warnings, broker access, transfer and
    /// upgrade stalls, multi-control links.
    struct Watches {
        let offline: OfflineWatch
        let transfer: TransferWatch
        let ota: OTAWatch
        let links: LinkEngine
    }

    /// Makes the watches and, where the role writes, has the writer tell them every change (in this order);
    /// upgrades a restart interrupted are followed again, the links loaded, and the daemon imports the scenes file.
    static func makeWatches(_ configuration: AgentConfiguration, role: Role, cache: DeviceCache, local: LocalStore?,
                            upgrades: [OTAUpgrade], writer: CacheWriter, hub: EventHub, topics: Topics,
                            provisioning: Provisioning?, models: CurrentModels, reloadable: ReloadableSettings,
                            standing: Standing, replica: GroupReplica?, logger: AgentLogger) throws -> Watches {
        // Only the writer's roles warn, and they keep the warnings in the file so that a restart neither loses nor
        // repeats one.
        let alerts = role.writesCache ? local.map(OfflineAlertStore.init) : nil
        let offline = OfflineWatch(grace: configuration.offlineGracePeriod, hub: hub, store: alerts,
                                   logger: logger, standing: standing) { device in local?.offlineWarningEnabled(device) ?? true }
        let transfer = TransferWatch(stallTimeout: configuration.transferStallTimeout, writer: writer,
                                     topics: topics, logger: logger)
        let ota = OTAWatch(stallTimeout: configuration.otaStallTimeout, writer: writer, logger: logger)
        let links = LinkEngine(cache: cache, hub: hub, logger: logger,
                               grace: max(configuration.requestTimeout, .seconds(5)), models: models)
        let watches = Watches(offline: offline, transfer: transfer, ota: ota, links: links)
        guard role.writesCache else { return watches }
        writer.watches.add(offline)
        if let provisioning { writer.watches.add(AccessWatch(provisioning: provisioning)) }
        writer.watches.add(transfer)
        writer.watches.add(ota)
        // In a group, the active instance's upgrades and transfers go to the standbys.
        if let replica { writer.watches.add(ReplicaWatch(replica: replica, standing: standing, writer: writer)) }
        writer.upgrades.load(upgrades)
        ota.watchCached(upgrades, now: Timestamp.now())
        if let local {
            // The links hear every change, as the watches do; they send sets only once the daemon's `start()`
            // connected (a stand-in's short life sends none, but a replacement it writes moves them too).
            links.load(try local.links())
            writer.watches.add(links)
            if role.speaksForTheFleet {
                let (scenes, models) = (reloadable.scenes, reloadable.models)
                try importScenes(scenes, from: configuration.scenesFile, into: local, logger: logger) {
                    models.model(for: cache.device($0)?.info.productId)
                }
            }
        }
        return watches
    }

    /// The receive path's counters as the daemon keeps them in the file (`thing-agent stats`), counted from this
    /// start; nil for the other roles, which leave the daemon's counters alone.
    static func counterReport(role: Role, ingestor: Ingestor) -> (@Sendable () -> [String: Int64])? {
        guard role.speaksForTheFleet else { return nil }
        let since = Timestamp.now()
        let counters = ingestor.counters
        return { @Sendable in
            var rows = counters.snapshot.metaRows
            rows[IngestStatistics.sinceKey] = since
            return rows
        }
    }

    /// The batches' writer thread, with the counters to write beside each batch and the check that the file is
    /// still there.
    static func makeFlusher(_ configuration: AgentConfiguration, role: Role, writer: CacheWriter,
                            report: (@Sendable () -> [String: Int64])?, local: LocalStore?,
                            logger: AgentLogger) -> CacheFlusher {
        var check: (@Sendable () -> Void)?
        if role.writesCache {
            let fileCheck = CacheFileCheck(path: configuration.cache.database, writer: writer, local: local)
            check = { fileCheck.run() }
        }
        return CacheFlusher(writer: writer, interval: configuration.cache.flushInterval, report: report, check: check,
                            logger: logger)
    }

    /// Applies what the last run journaled but did not get into SQLite, writes it, and starts a fresh journal; then
    /// the watches learn what the replayed cache holds (statuses, transfers in progress).
    static func replayJournal(role: Role, writer: CacheWriter, ingestor: Ingestor, watches: Watches,
                              report: (@Sendable () -> [String: Int64])?, logger: AgentLogger,
                              shouldStop: @escaping @Sendable () -> Bool) throws {
        let replayed = try writer.replayJournal(shouldStop: shouldStop) { ingestor.replay($0) }
        ingestor.counters.reset()
        try writer.flush(meta: report?() ?? [:])
        try writer.compactJournal(threshold: 0)
        if replayed > 0 { logger.info("replayed the journal", metadata: ["records": "\(replayed)"]) }
        guard role.writesCache else { return }
        // After the replay, so that the cache (and the watch) know every status the killed run had taken in.
        let cache = writer.cache
        watches.offline.restore(offline: cache.filter { $0.online == false }.map { ($0.id, $0.updatedAt) })
        watches.transfer.watchCached(cache.filter { $0.transfer.map { !$0.status.isIdle } ?? false }, now: Timestamp.now())
    }
}
