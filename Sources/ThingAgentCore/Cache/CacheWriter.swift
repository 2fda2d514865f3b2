import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// The one way the cache changes. On the receive path: journal the raw message (durable against a killed process),
/// apply it to the device's snapshot in place, mark what changed as dirty, tell listeners. SQLite gets the dirty
/// devices later, in one transaction per batch, with the journal position it covers (`flush()`).
/// Memory never runs ahead of the journal, and SQLite plus the journal's tail always hold everything applied.
/// One writer per cache file: the daemon, or a command that holds the cache's lock while no daemon runs.
final package class CacheWriter: Sendable {
    package let cache: DeviceCache
    package let hub: EventHub
    /// Told of every change applied (the offline and transfer watches).
    package let watches = CacheWatches()
    /// The latest firmware upgrade per device (`CacheWriter+OTA.swift` changes it).
    package let upgrades = OTAUpgrades()
    /// Property codes one device may have (`maxPropertiesPerDevice`).
    package let maxProperties: Int
    /// `trustForeignTransfers`: a finish for a transfer started elsewhere re-links when the gateway is eligible.
    package let trustsForeignTransfers: Bool
    /// The models a replacement's moved link members are checked against again.
    package let models: CurrentModels
    /// Transfers started through this process, gateway to target (the file holds those of every process).
    package let acceptedTransfers = Mutex<[String: String]>([:])

    /// What changed per device since the last flush.
    package struct Dirty: Sendable {
        /// The device's own row (info, status, signal) changed, or the device is new.
        var row = false
        var properties: Set<String> = []
        var transfer = false
        /// Names of events whose latest changed.
        var events: Set<String> = []
        /// The device was removed: the flush deletes its rows first (then writes it again if it came back since).
        var removed = false
        /// The target of the accepted transfer this device (a gateway) ended: its record goes with the flush.
        var endedAcceptedTransfer: String?
        /// This device (a gateway) finished replacing this faulty gateway, at this device time: the flush moves the
        /// local tables' groups, scenes, links and fields in the transaction that writes the re-linked sub-devices.
        var replaced: (old: String, time: Millis)?

        mutating func mark(_ changes: AppliedChanges, isNew: Bool) {
            for change in changes.properties { properties.insert(change.code) }
            for event in changes.events { events.insert(event.name) }
            if changes.transfer != nil || changes.timesMoved { transfer = true }
            if isNew || changes.status != nil || changes.wifiSignal != nil || changes.rsrp != nil || changes.info
                || changes.timesMoved {
                row = true
            }
        }

        mutating func merge(_ other: Dirty) {
            row = row || other.row
            properties.formUnion(other.properties)
            events.formUnion(other.events)
            transfer = transfer || other.transfer
            removed = removed || other.removed
            endedAcceptedTransfer = other.endedAcceptedTransfer ?? endedAcceptedTransfer
            replaced = other.replaced ?? replaced
        }
    }

    package struct IngestState: ~Copyable {
        var journal: Journal?
        var dirty: [String: Dirty] = [:]
    }

    /// Serializes every change: journal append, in-place apply, dirty marking, and the flusher's consistent cut.
    private let ingest: Mutex<IngestState>
    /// The SQLite side; nil for a memory-only cache (`thing-agent watch` must not write the daemon's file).
    package let store: Mutex<CacheStore?>
    /// One flush or compaction at a time: each takes its cut under the ingest lock but writes after releasing it,
    /// so two running together could commit an older cut after a newer one (and move the journal position back).
    private let flushing = Mutex(())
    /// Wakes the flusher when the dirty set stops being empty.
    package let dirtySignal = DispatchSemaphore(value: 0)
    /// What fails in the files written here, and whether new messages must be left with the broker meanwhile.
    package let storage: StorageMonitor
    /// The SQLite file, to name it when it fails.
    package let databasePath: String?

    /// The journal's used bytes, read by the metrics without the ingest lock.
    package let journalUsage: AtomicCounter?

    package init(store: sending CacheStore?, journal: sending Journal?, cache: DeviceCache, hub: EventHub,
         storage: StorageMonitor = StorageMonitor(), maxProperties: Int = .max,
         trustsForeignTransfers: Bool = false, models: CurrentModels = CurrentModels(ThingModels())) {
        self.models = models
        journalUsage = journal?.usedBytes
        self.storage = storage
        databasePath = store?.database.path
        self.maxProperties = maxProperties
        self.trustsForeignTransfers = trustsForeignTransfers
        self.store = Mutex(store)
        self.ingest = Mutex(IngestState(journal: journal))
        self.cache = cache
        self.hub = hub
    }

    package enum Outcome: Equatable {
        case changed(AppliedChanges)
        case unchanged
    }

    /// Applies `message` to `deviceId` (creating the device on its first valid message). `raw` is journaled first
    /// when given; replays of the journal pass nil. A transfer that reaches `finish` re-links the faulty gateway's
    /// sub-devices as part of the same change (so a replay of the journaled report re-links them again).
    package func apply(_ message: InboundMessage, to deviceId: String, now: Millis,
               raw: (topic: String, payload: [UInt8])? = nil) throws -> Outcome {
        return try applyInPlace(to: deviceId, now: now, prepared: (message, raw)) ?? .unchanged
    }

    /// A message to apply and, when it is to be journaled, its raw form.
    package typealias Prepared = (message: InboundMessage, raw: (topic: String, payload: [UInt8])?)

    /// The in-place path: under the ingest lock, `prepare` sees the device's current snapshot and gives the message
    /// to apply (nil: nothing to do, and nil is returned); it is journaled, applied, marked dirty; then listeners
    /// hear of it.
    /// `prepared` skips `prepare` (and the copy of the snapshot it would need): the receive path's case.
    package func applyInPlace(to deviceId: String, now: Millis, prepared: Prepared? = nil,
                      _ prepare: ((DeviceSnapshot?) -> Prepared?)? = nil) throws -> Outcome? {
        let wantsEvents = hub.hasListeners
        let (outcome, events, wake) = try ingest.withLock { state throws -> (Outcome?, [DeviceEvent], Bool) in
            guard let (message, raw) = prepared ?? prepare?(cache.device(deviceId)) else { return (nil, [], false) }
            try append(raw, now: now, to: state.journal)

            let applied = try cache.mutate(deviceId, create: { DeviceSnapshot(id: deviceId, seenAt: now) }) {
                device, isNew -> (AppliedChanges, Bool, [DeviceEvent]) in
                let changes = try device.apply(message, now: now, maxProperties: maxProperties)
                let events = wantsEvents && !changes.isEmpty ? changes.events(for: device) : []
                return (changes, isNew, events)
            }
            guard let (applyChanges, isNew, deviceEvents) = applied else { return (.unchanged, [], false) }
            var changes = applyChanges
            // Codes refused over the limit are news for the counters, not for the cache: `.changed` with empty
            // changes.
            let unchanged: Outcome = changes.refusedCodes > 0 ? .changed(changes) : .unchanged
            guard !changes.isEmpty || isNew || changes.timesMoved else { return (unchanged, [], false) }
            let wasClean = state.dirty.isEmpty
            if changes.isEmpty && !isNew {
                // Only a time moved: persisted, not an event and not a change for the counters.
                state.dirty[deviceId, default: Dirty()].mark(changes, isNew: false)
                return (unchanged, [], wasClean)
            }
            state.dirty[deviceId, default: Dirty()].mark(changes, isNew: isNew)
            var events = deviceEvents
            if let transfer = changes.transfer, transfer.status == .finish, let faulty = transfer.targetDeviceId {
                let accepted = isAccepted(gateway: deviceId, target: faulty)
                if accepted {
                    // Finished: another finish for the same pair is not trusted again without a new start. (The
                    // stall verdict forgets the record too: a finish after it moves nothing.)
                    acceptedTransfers.withLock { _ = $0.removeValue(forKey: deviceId) }
                    state.dirty[deviceId, default: Dirty()].endedAcceptedTransfer = faulty
                }
                if accepted || isEligibleForeignTransfer(gateway: deviceId, target: faulty) {
                    events += relinkInPlace(of: faulty, to: deviceId, reportedAt: transfer.time, now: now,
                                            dirty: &state.dirty, wantsEvents: wantsEvents)
                    state.dirty[deviceId, default: Dirty()].replaced = (faulty, transfer.time)
                    changes.replacedGateway = faulty
                } else {
                    changes.untrustedFinish = true
                }
            }
            return (.changed(changes), events, wasClean)
        }
        if wake { dirtySignal.signal() }
        hub.publish(events)
        if case .changed(let changes)? = outcome { watches.applied(changes, to: deviceId, now: now) }
        return outcome
    }

    /// Removes a device from memory (journaled first, like any change); the next flush deletes its rows.
    /// Returns false when the device was not known. `raw` is the unbind message that asked for it, when any.
    @discardableResult
    package func remove(_ deviceId: String, now: Millis, raw: (topic: String, payload: [UInt8])? = nil) throws -> Bool {
        let (removed, wake) = try ingest.withLock { state throws -> (Bool, Bool) in
            try append(raw, now: now, to: state.journal)
            guard cache.remove(deviceId) else { return (false, false) }
            let wasClean = state.dirty.isEmpty
            state.dirty[deviceId] = Dirty(removed: true)
            return (true, wasClean)
        }
        if wake { dirtySignal.signal() }
        if removed {
            upgrades.forget(deviceId)
            watches.removed(deviceId)
        }
        return removed
    }

    /// Journals a message (when it is to be journaled). A failure is reported as a storage problem that holds
    /// intake: the message was not kept, so the receive path must leave it with the broker.
    private func append(_ raw: (topic: String, payload: [UInt8])?, now: Millis, to journal: Journal?) throws {
        guard let raw, let journal else { return }
        do {
            try journal.append(topic: raw.topic, payload: raw.payload, arrival: now)
        } catch {
            storage.fail(journal.path, .journalAppend, "\(error)", holdsIntake: true)
            throw error
        }
    }

    /// Moves the faulty gateway's sub-devices to `gateway` in memory and marks them dirty (see
    /// `DeviceSnapshot.relink` for the rule). Runs under the ingest lock, within the finish report's change.
    private func relinkInPlace(of faulty: String, to gateway: String, reportedAt time: Millis, now: Millis,
                               dirty: inout [String: Dirty], wantsEvents: Bool) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        for sub in cache.subDevices(of: faulty) where sub.id != gateway {
            let moved = try? cache.mutate(sub.id, create: { nil }) { device, _ -> DeviceInfo in
                device.relink(to: gateway, at: time, now: now)
                return device.info
            }
            guard let info = moved.flatMap({ $0 }) else { continue }
            dirty[sub.id, default: Dirty()].row = true
            if wantsEvents { events.append(.infoChanged(deviceId: sub.id, info: info)) }
        }
        return events
    }

    package var hasDirty: Bool { ingest.withLock { !$0.dirty.isEmpty } }

    /// Writes every dirty device to SQLite in one transaction, together with the journal position it covers and
    /// the `meta` rows given (the daemon's receive-path counters). The SQLite work runs outside the ingest lock; on
    /// failure the dirty marks are kept for the next try.
    package func flush(meta: [String: Int64] = [:]) throws {
        try flushing.withLock { _ in try flushNow(meta: meta) }
    }

    private func flushNow(meta: [String: Int64]) throws {
        let (devices, dirty, position) = ingest.withLock { state -> ([DeviceSnapshot], [String: Dirty], (UInt64, Int64)?) in
            let dirty = state.dirty
            state.dirty = [:]
            return (cache.devices(dirty.keys), dirty, state.journal.map { ($0.generation, $0.end) })
        }
        guard !dirty.isEmpty || !meta.isEmpty else { return }
        do {
            try write(devices, dirty, position: dirty.isEmpty ? nil : position, meta: meta)
        } catch {
            ingest.withLock { state in
                for (id, marks) in dirty { state.dirty[id, default: Dirty()].merge(marks) }
            }
            throw error
        }
    }

    /// Empties the journal once it has grown past `threshold` bytes. Under steady load the dirty set is never empty,
    /// so this writes what is dirty itself, holding the ingest lock throughout (a pause of one flush every
    /// `threshold` bytes of messages), so that no record slips in between the write and the reset.
    package func compactJournal(threshold: Int64) throws {
        try flushing.withLock { _ in try compactJournalNow(threshold: threshold) }
    }

    private func compactJournalNow(threshold: Int64) throws {
        try ingest.withLock { state in
            guard let journal = state.journal, journal.end > threshold else { return }
            try startNextGeneration(&state, in: journal)
        }
    }

    /// Writes what is dirty with the position of the current journal, then empties `next` (the current journal, or
    /// a new file that takes its place) into the following generation. Under the ingest lock.
    private func startNextGeneration(_ state: inout IngestState, in next: Journal) throws {
        guard let journal = state.journal else { return }
        if !state.dirty.isEmpty {
            try write(cache.devices(state.dirty.keys), state.dirty, position: (journal.generation, journal.end))
            state.dirty = [:]
        }
        try store.withLock { store in
            let generation = max(journal.generation, next.generation) + 1
            // SQLite learns of the new generation first: a crash before the reset leaves an older file,
            // which start-up then knows it has already applied.
            try store?.setJournalPosition(generation: generation, applied: Int64(Journal.headerSize))
            try next.reset(generation: generation)
        }
        state.journal = next
    }

    /// The file check's part for the journal. A journal truncated by someone else is made whole again, one deleted
    /// or replaced is created anew (a file found in its place is kept beside it); either way what memory holds is
    /// written to SQLite first, then the journal starts a new generation. A journal that found no room to grow
    /// gets it here, once the disk has room again, or is emptied into SQLite when SQLite can take it. Each case
    /// holds intake until it is repaired.
    package func checkJournal() {
        try? flushing.withLock { _ throws in
            try ingest.withLock { state throws in
                guard let journal = state.journal else { return }
                if let problem = journal.problem() {
                    storage.fail(journal.path, .check, "the journal \(journal.path): \(problem)", holdsIntake: true)
                    do {
                        if case .truncated = problem {
                            try startNextGeneration(&state, in: journal)
                        } else {
                            try startNextGeneration(&state, in: try Self.journalInPlaceOf(journal))
                        }
                    } catch {
                        storage.fail(journal.path, .check, "the journal \(journal.path): \(problem); cannot repair it "
                                     + "yet: \(error)", holdsIntake: true)
                        return
                    }
                    storage.recovered(journal.path, .check)
                    storage.recovered(journal.path, .journalAppend)
                } else if storage.isFailing(journal.path, .journalAppend) {
                    // Room to grow, or else room at the start: SQLite takes what the journal holds, when it can.
                    if (try? journal.makeRoom()) != nil || (try? startNextGeneration(&state, in: journal)) != nil {
                        storage.recovered(journal.path, .journalAppend)
                    }
                }
            }
        }
    }

    /// A new journal at the path of one that was deleted or replaced (the file found there is renamed aside).
    private static func journalInPlaceOf(_ journal: Journal) throws -> Journal {
        if access(journal.path, F_OK) == 0 {
            let aside = "\(journal.path).replaced-\(Timestamp.now())"
            guard rename(journal.path, aside) == 0 else {
                throw JournalError(path: journal.path, operation: "move aside", code: errno)
            }
        }
        return try Journal(path: journal.path, initialCapacity: journal.initialCapacity)
    }

    /// Swaps the SQLite side, between two flushes: `body` gets the open store and gives the one to use from now on.
    package func replaceStore(_ body: (CacheStore) throws -> CacheStore) throws {
        try flushing.withLock { _ throws in
            try store.withLock { store throws in
                guard let current = store else { return }
                store = try body(current)
            }
        }
    }

    /// Copies the WAL into the main file and empties it (at a graceful stop, after the last flush).
    package func checkpoint() throws {
        try store.withLock { store in try store?.database.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// Writes `meta` rows alone (the receive-path counters), in a transaction of their own.
    package func writeMeta(_ rows: [String: Int64]) throws {
        try write([], [:], position: nil, meta: rows)
    }

    private func write(_ devices: [DeviceSnapshot], _ dirty: [String: Dirty], position: (UInt64, Int64)?,
                       meta: [String: Int64] = [:]) throws {
        try store.withLock { store in
            guard let store else { return }
            try store.database.transaction(.immediate) {
                for (id, marks) in dirty where marks.removed {
                    _ = try CacheSchema.deleteDevice(id, in: store.database)
                }
                for device in devices {
                    let marks = dirty[device.id] ?? Dirty()
                    try store.write(device, row: marks.row, properties: marks.properties, transfer: marks.transfer,
                                    events: marks.events)
                }
                for (gateway, marks) in dirty {
                    if let target = marks.endedAcceptedTransfer {
                        try store.forgetAcceptedTransfer(gateway: gateway, target: target)
                    }
                    if let (old, time) = marks.replaced {
                        _ = try ReplacementMoves.move(from: old, to: gateway, time: time, now: Timestamp.now(),
                                                      models: models, in: store.database)
                    }
                }
                if let (generation, applied) = position {
                    try store.setJournalPosition(generation: generation, applied: applied)
                }
                if !meta.isEmpty {
                    try store.setMeta(meta.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) })
                }
            }
        }
    }

    /// Replays the journal records SQLite has not seen (start-up), through `apply`; returns how many were read.
    package func replayJournal(shouldStop: () -> Bool = { false }, _ body: (Journal.Record) -> Void) throws -> Int {
        let records = try ingest.withLock { state throws -> [Journal.Record] in
            guard let journal = state.journal else { return [] }
            let stored: (generation: UInt64, applied: Int64)? = try store.withLock { try $0?.journalPosition() }
            let position = stored ?? (generation: 0, applied: 0)
            if journal.generation < position.generation { return [] }
            let from = journal.generation == position.generation ? position.applied : 0
            return journal.records(from: from).map(\.record)
        }
        for (index, record) in records.enumerated() {
            // Nothing replayed reaches SQLite before the whole replay did: stopping here loses nothing.
            if index & 1023 == 1023, shouldStop() { throw StartUpInterrupted() }
            body(record)
        }
        return records.count
    }
}
