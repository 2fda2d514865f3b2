import Dispatch
import FoundationEssentials
import Glibc
import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// Bounds of the receive path (`maxClockSkew`, `maxDevices`); the per-device property bound is the writer's.
struct IngestLimits: Sendable {
    /// Milliseconds a time may be ahead of the arrival.
    var maxClockSkew: Millis = 300_000
    var maxDevices = 1_000_000

    init() {}

    init(_ configuration: AgentConfiguration) {
        maxClockSkew = Millis(configuration.cache.maxClockSkew * 1000)
        maxDevices = configuration.cache.maxDevices
    }
}

/// The receive path. Runs on the MQTT network thread for every message, before the broker gets its PUBACK,
/// so that a QoS 1 report is on disk before the broker forgets it. Keep it short: no waiting, no per-message tasks;
/// the one wait is deliberate, when the storage cannot keep a message (`waitWhileStorageHolds`).
final class Ingestor: Sendable {
    let dialects: Dialects
    let writer: CacheWriter
    let tracker: RequestTracker
    let counters = IngestCounters()
    let logger: AgentLogger
    private let limiter = LogRateLimiter()
    /// Takes messages on topics outside the device tree (the agent's API requests); true when taken.
    /// Consulted only after a topic failed to parse as a device topic, so device messages never pay for it.
    private let elsewhere: (@Sendable (MQTTMessage) -> Bool)?
    let limits: IngestLimits
    /// Devices already warned about for `maxPropertiesPerDevice` (each is logged once), and whether the device
    /// limit was.
    private let limitsLogged = Mutex<(devices: Set<String>, fleet: Bool)>(([], false))
    /// Cuts the broker connection before the PUBACK of a message that could not be kept goes out.
    private let refuse = Mutex<(@Sendable () -> Void)?>(nil)
    /// Sends the answers a dialect says the platform owes a device (an Alink post's reply); nil where nobody
    /// sends them (the CLI's roles). An object, not a closure kept in a `Mutex`: read with `withLock { $0 }` on
    /// every message, such a closure was wrapped in one more reabstraction thunk at every read, and the chain made
    /// each reply cost more than the last.
    private let replies: ReplySender?
    /// Set when the agent stops: a message waiting for the storage is then left with the broker.
    private let stopping = Atomic<Bool>(false)
    /// While the receive path waits for the storage (uptime nanoseconds of its last round; 0 when not waiting):
    /// the network thread is then deliberately parked, not stuck, and the watchdog must go on being fed.
    private let holdHeartbeat = Atomic<UInt64>(0)
    /// Whether the hub holds the events of the current network turn (set by its first message, cleared at its end).
    private let holdingEvents = Atomic<Bool>(false)

    init(dialects: Dialects, writer: CacheWriter, tracker: RequestTracker, logger: AgentLogger,
         elsewhere: (@Sendable (MQTTMessage) -> Bool)? = nil, replies: ReplySender? = nil,
         limits: IngestLimits = IngestLimits()) {
        self.elsewhere = elsewhere
        self.replies = replies
        self.limits = limits
        self.dialects = dialects
        self.writer = writer
        self.tracker = tracker
        self.logger = logger
    }

    func handle(_ message: MQTTMessage) {
        while true {
            if !writer.storage.holdsIntake {
                // The events of a turn's messages go to the listeners together, when the turn ends (`endTurn`).
                if !holdingEvents.exchange(true, ordering: .relaxed) { writer.hub.hold() }
                counters.countReceived()
                if process(topic: message.topic, payload: message.payload, arrival: Timestamp.now(), journal: true,
                           message: message) { return }
                counters.countNotTaken()
            }
            // Nothing stays held while the receive path waits for the storage: other events (an offline warning)
            // go on meanwhile.
            endTurn()
            guard waitWhileStorageHolds() else { return }
        }
    }

    /// The network turn ended: the events its messages made go to the listeners.
    func endTurn() {
        if holdingEvents.exchange(false, ordering: .relaxed) { writer.hub.release() }
    }

    /// How to refuse a message: cut the connection so that nothing more, its PUBACK included, reaches the broker.
    func onRefuse(_ body: @escaping @Sendable () -> Void) {
        refuse.withLock { $0 = body }
    }

    /// The agent stops: a message waiting for the storage is left with the broker.
    func stopWaiting() {
        stopping.store(true, ordering: .relaxed)
    }

    /// The message at hand cannot be kept (the journal cannot take it, or a file check holds intake): the
    /// connection is cut before its PUBACK goes out, so the broker keeps it and everything after it. Then this waits,
    /// on the network thread, so that nothing else is taken meanwhile, until the storage works again (true: take
    /// the message now; the broker sends it again after the reconnect, a repeat that changes nothing) or the agent
    /// stops (false).
    private func waitWhileStorageHolds() -> Bool {
        beatWhileHolding()
        defer { holdHeartbeat.store(0, ordering: .relaxed) }
        refuse.withLock { $0 }?()
        while !stopping.load(ordering: .relaxed) {
            usleep(100_000)
            beatWhileHolding()
            if !writer.storage.holdsIntake { return true }
        }
        return false
    }

    private func beatWhileHolding() {
        holdHeartbeat.store(max(DispatchTime.now().uptimeNanoseconds, 1), ordering: .relaxed)
    }

    /// How long ago the wait for the storage last went round; nil when the receive path is not waiting.
    var holdIdle: Duration? {
        let last = holdHeartbeat.load(ordering: .relaxed)
        guard last != 0 else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        return .nanoseconds(Int64(clamping: now > last ? now - last : 0))
    }

    /// Re-applies a journaled message at start-up (not journaled again, not counted as received).
    func replay(_ record: Journal.Record) {
        process(topic: record.topic, payload: record.payload, arrival: record.arrival, journal: false)
    }

    /// False when the message could not be kept (the journal failed): nothing was applied or counted.
    @discardableResult
    private func process(topic: String, payload: [UInt8], arrival now: Millis, journal: Bool,
                         message original: MQTTMessage? = nil) -> Bool {
        let message = (topic: topic, payload: payload)
        let routed: (dialect: any Dialect, route: DialectRoute)
        do {
            routed = try dialects.route(message.topic)
        } catch {
            if error == .notAThingTopic, let original, let elsewhere, elsewhere(original) {
                counters.countUnchanged()
                return true
            }
            drop(error == .invalidDeviceID ? .invalidDeviceID : .unknownTopic, message.topic,
                 error == .invalidDeviceID ? "invalid device id" : "not a thing topic", now: now)
            return true
        }
        let (device, kind) = (routed.route.device, routed.route.kind)
        // An empty payload clears a retained message (a removed device's status and info): nothing to apply.
        if message.payload.isEmpty {
            counters.countUnchanged()
            return true
        }
        guard message.payload.count <= PayloadDecoder.maxPayloadBytes else {
            drop(.oversized, message.topic, "payload of \(message.payload.count) bytes is over 256 KiB", now: now)
            return true
        }
        var inbound: DialectMessage
        do {
            inbound = try message.payload.withUnsafeBytes { bytes throws(PayloadError) in
                try routed.dialect.decode(routed.route, payload: bytes, arrival: now)
            }
        } catch {
            drop(.malformed, message.topic, (error as? PayloadError)?.reason ?? "\(error)", now: now)
            return true
        }
        let (checked, corrected) = inbound.message.correctingClockSkew(arrival: now, maxSkew: limits.maxClockSkew)
        if corrected {
            inbound.message = checked
            counters.countGuard(.clockSkew)
            if limiter.shouldLog(message.topic, now: now) {
                logger.warning("a time too far ahead of the agent's clock was replaced by the arrival time", metadata: [
                    "topic": String(message.topic.prefix(200)), "maxClockSkew": "\(limits.maxClockSkew / 1000) s"])
            }
        }
        let raw = journal ? message : nil
        // A device that announces no status is online on the evidence of its own traffic.
        if routed.dialect.trafficMeansOnline, !markOnline(device, routed.dialect, now: now) { return false }
        if case .query(let query) = inbound.message {
            // Nothing to keep; a live question is answered (a replay's was, the first time).
            if journal { replies?.answer(query, from: device, in: routed.dialect) }
            counters.countUnchanged()
            return true
        }
        guard take(inbound.message, kind: kind, from: device, topic: message.topic, now: now, raw: raw) else {
            return false
        }
        // The answers the platform owes, once the message is kept (a replay answered them the first time).
        if journal, let replies { inbound.replies.forEach(replies.send) }
        return true
    }

    /// Applies a decoded message by its kind; false when the journal could not take it.
    private func take(_ decoded: InboundMessage, kind: InboundKind, from device: String, topic: String, now: Millis,
                      raw: (topic: String, payload: [UInt8])?) -> Bool {
        switch decoded {
        case .answeredOnly:
            counters.countUnchanged()
            return true
        case .batch(let items):
            return applyBatch(items, topic: topic, now: now, raw: raw)
        case .response(let response):
            guard case .response(let request) = kind else { break }
            return handleResponse(response, to: request, from: device, topic: topic, now: now, raw: raw)
        case .otaProgress(let report):
            applyUpgradeProgress(report, from: device, topic: topic, now: now)
            return true
        default:
            break
        }
        return apply(decoded, to: device, topic: topic, now: now, raw: raw)
    }

    /// A message about several devices: each applied in order, the whole counted once (applied when any changed).
    /// The message is journaled with the first; a replay decodes it again and applies them all.
    private func applyBatch(_ items: [DeviceMessage], topic: String, now: Millis,
                            raw: (topic: String, payload: [UInt8])?) -> Bool {
        var changed = false, journaled = false
        for item in items where DeviceID.isValid(item.device) && hasRoom(for: item.device) {
            defer { journaled = true }
            switch applyUncounted(item.message, to: item.device, now: now, raw: journaled ? nil : raw) {
            case nil: return false
            case true?: changed = true
            case false?: break
            }
        }
        if changed { counters.countApplied() } else { counters.countUnchanged() }
        return true
    }

    /// A device whose dialect announces no status is online on the evidence of its own message; one heard for the
    /// first time also gets what its id says of it (`Dialect.identity`). Neither is journaled or counted on its
    /// own: the message is, and a replay of it decides both again. False when the journal failed.
    private func markOnline(_ device: String, _ dialect: any Dialect, now: Millis) -> Bool {
        // On every message of such a device: its status alone, not a copy of its snapshot.
        let (known, online) = writer.cache.status(of: device)
        guard online != true, known || hasRoom(for: device) else { return true }
        if !known, let identity = dialect.identity(of: device),
           applyUncounted(.info(identity, time: now), to: device, now: now, raw: nil) == nil {
            return false
        }
        return applyUncounted(.status(online: true, time: now, via: .traffic), to: device, now: now, raw: nil) != nil
    }

    /// Whether the cache may hold `device`: known, or room for one more (`maxDevices`; the message itself is then
    /// dropped and counted by `apply`).
    private func hasRoom(for device: String) -> Bool {
        writer.cache.count < limits.maxDevices || writer.cache.contains(device)
    }

    /// Applies one message to the cache without counting it: whether anything changed, nil when the journal
    /// failed (a store failure is logged and counts as no change).
    private func applyUncounted(_ message: InboundMessage, to device: String, now: Millis,
                                raw: (topic: String, payload: [UInt8])?) -> Bool? {
        do {
            if case .changed(let changes) = try writer.apply(message, to: device, now: now, raw: raw) {
                return !changes.isEmpty
            }
            return false
        } catch is JournalError {
            return nil
        } catch {
            logger.warning("could not apply a message for a device", metadata: ["device": device, "error": "\(error)"])
            return false
        }
    }

    private func handleResponse(_ response: Response, to request: RequestKind, from device: String,
                                topic: String, now: Millis, raw: (topic: String, payload: [UInt8])?) -> Bool {
        // A successful info/get answer is an info report, whoever asked for it, and counts as one (applied or
        // unchanged). Any other answer counts as unchanged when a request waited for it, as for other clients when
        // it is not one of ours, as dropped when it came late for one of ours: every message ends in exactly one
        // outcome.
        let info = request == .getInfo && response.code == 0 ? response.data?.objectValue : nil
        if let info, !apply(.info(info, time: response.time), to: device, topic: topic, now: now, raw: raw) {
            return false
        }
        guard raw != nil else {  // a replayed answer has no request waiting any more
            if info == nil { counters.countUnchanged() }
            return true
        }
        switch tracker.resolve(deviceId: device, kind: request, response) {
        case .delivered:
            if info == nil { counters.countUnchanged() }
        case .late:
            // One of ours that already ended: worth a line (the device is slow, or the timeout short).
            if info == nil { counters.countDrop(.unmatchedResponse) }
            logger.notice("dropped a late answer: its request had already timed out or been cancelled", metadata: [
                "topic": topic, "msgId": response.msgId, "code": "\(response.code)"])
        case .unknown:
            // Usually an answer to another client (the CLI, another agent): all of them hear every answer.
            if info == nil { counters.countForOtherClients() }
            if limiter.shouldLog(topic, now: now) {
                logger.debug("ignored an answer that no request waits for", metadata: [
                    "topic": topic, "msgId": response.msgId])
            }
        }
        return true
    }

    /// False when the journal could not take the message (nothing applied, nothing counted).
    @discardableResult
    private func apply(_ message: InboundMessage, to device: String, topic: String, now: Millis,
                       raw: (topic: String, payload: [UInt8])?) -> Bool {
        if case .unbind = message {
            do {
                if try writer.remove(device, now: now, raw: raw) {
                    counters.countApplied()
                    logger.info("device removed", metadata: ["device": device])
                } else {
                    counters.countUnchanged()
                }
            } catch is JournalError {
                return false
            } catch {
                counters.countDrop(.storeFailed)
                logger.error("could not remove a device", metadata: ["device": device, "error": "\(error)"])
            }
            return true
        }
        if writer.cache.count >= limits.maxDevices, !writer.cache.contains(device) {
            counters.countDrop(.deviceLimit)
            let first = limitsLogged.withLock { logged in
                defer { logged.fleet = true }
                return !logged.fleet
            }
            if first {
                logger.error("the cache holds maxDevices devices: messages from new devices are refused", metadata: [
                    "maxDevices": "\(limits.maxDevices)", "device": device])
            }
            return true
        }
        do {
            switch try writer.apply(message, to: device, now: now, raw: raw) {
            case .changed(let changes) where changes.isEmpty:
                // Only new property codes over the limit: nothing else changed.
                counters.countUnchanged()
                refusedCodes(changes, device: device)
            case .changed(let changes):
                counters.countApplied()
                refusedCodes(changes, device: device)
                if changes.untrustedFinish, let target = changes.transfer?.targetDeviceId {
                    counters.countGuard(.untrustedTransfer)
                    // Also a finish after this agent's stall verdict or after its finish: that start is over.
                    logger.warning("a gateway reported a finished transfer this agent did not start; no sub-device moved",
                                   metadata: ["gateway": device, "target": target])
                }
            case .unchanged:
                counters.countUnchanged()
            }
            if case .info(let report, let time) = message, let version = report["firmwareVersion"]?.stringValue {
                endUpgrade(of: device, reporting: version, at: time, topic: topic, now: now)
            }
        } catch let error as PayloadError {
            drop(.malformed, topic, error.reason, now: now)
        } catch is JournalError {
            return false
        } catch {
            counters.countDrop(.storeFailed)
            logger.error("could not write to the cache; the message is lost", metadata: [
                "topic": topic, "error": "\(error)"])
        }
        return true
    }

    private func refusedCodes(_ changes: AppliedChanges, device: String) {
        guard changes.refusedCodes > 0 else { return }
        counters.countGuard(.propertyLimit)
        let first = limitsLogged.withLock { logged in
            // A bounded memory of whom we told: past it, everyone is told again once.
            if logged.devices.count >= 10_000 { logged.devices.removeAll() }
            return logged.devices.insert(device).inserted
        }
        if first {
            logger.warning("a device reported more property codes than maxPropertiesPerDevice; the new ones are refused",
                           metadata: ["device": device, "maxPropertiesPerDevice": "\(writer.maxProperties)",
                                      "refused": "\(changes.refusedCodes)"])
        }
    }

    private func drop(_ reason: DropReason, _ topic: String, _ why: String, now: Millis) {
        counters.countDrop(reason)
        if limiter.shouldLog(topic, now: now) {
            logger.warning("dropped a message: \(why)", metadata: [
                "topic": String(topic.prefix(200)), "reason": reason.rawValue])
        }
    }
}

extension Ingestor {
    /// A firmware upgrade's progress: applied to the device's running upgrade (counted unchanged when there is
    /// none, or it is another version's or stale).
    func applyUpgradeProgress(_ report: OTAProgressReport, from device: String, topic: String, now: Millis) {
        do {
            let before = writer.upgrades.upgrade(device)
            let after = try writer.applyUpgradeProgress(report, device: device, now: now)
            if after != before { counters.countApplied() } else { counters.countUnchanged() }
        } catch {
            counters.countDrop(.storeFailed)
            logger.error("could not record firmware upgrade progress", metadata: ["topic": topic, "error": "\(error)"])
        }
    }

    /// Only an info report that carries `firmwareVersion` ends an upgrade, whether it changed the cached info or
    /// repeated it (a device that rolled back reports its old version again), and only one newer than the
    /// upgrade's latest progress report (`time`, the report's device time).
    func endUpgrade(of device: String, reporting version: String, at time: Millis, topic: String, now: Millis) {
        guard writer.upgrades.upgrade(device)?.isRunning == true else { return }
        do {
            if let ended = try writer.applyFirmwareReport(version, at: time, device: device, now: now),
               !ended.isRunning {
                logger.info("firmware upgrade ended", metadata: [
                    "device": device, "version": ended.image.version, "stage": ended.stage.rawValue,
                    "failedCode": ended.failedCode])
            }
        } catch {
            logger.error("could not record the end of a firmware upgrade", metadata: ["topic": topic, "error": "\(error)"])
        }
    }
}
