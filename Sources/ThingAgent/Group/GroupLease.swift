import Dispatch
import JSON
import MQTT
import Platform
import Synchronization
import ThingAgentCore

/// The lease of an agent group, held through the broker: which instance is active (docs/architecture.md, "Standby
/// instances").
///
/// The active instance renews a retained record on `thing-agent/groups/<group>/lease` (`holder`, `since`,
/// `renewed`, `expires`) every tenth of `failoverTimeout`. Every instance hears it, and hears the instances'
/// announcements (`thing-agent/agents/<id>/status`): the will a lost connection leaves there says at once that
/// the holder is gone. A standby claims the lease when no holder is heard: at once when the holder's will or its
/// release says it is gone, after 0.7 × `failoverTimeout` of silence otherwise (its host gone, its connection cut).
/// A claim is its own record; it is taken once `settle` passed with no other claim that wins over it. Of two live
/// holders the one with the later `since` (then the greater name) wins and the other steps down, so that all
/// instances come to the same answer whatever order the broker gave them the records in. The active steps down by
/// itself when none of its renewals was acknowledged for half of `failoverTimeout`: a standby may take over by then.
///
/// `accept` runs on the network thread (the receive path's topics outside the device tree); `run` is a part of
/// the agent, a loop on the cooperative pool.
final class GroupLease: Sendable {
    let group: String
    let instance: String
    let timeout: Duration
    let leaseTopic: String
    static let statusFilter = "thing-agent/agents/+/status"
    private let standing: Standing
    private let logger: AgentLogger

    /// What this instance knows of the lease.
    private struct View {
        /// The live holders and claimants heard, by instance: their `since`, and when their last record came.
        var holders: [String: (since: Int64, heard: ContinuousClock.Instant)] = [:]
        /// Instances whose announcement says offline now.
        var offline: Set<String> = []
        /// This instance's claim or lease: its `since`, and when it was claimed.
        var mine: (since: Int64, claimed: ContinuousClock.Instant)?
        /// When a renewal of this instance was last acknowledged by the broker.
        var acknowledged: ContinuousClock.Instant?
        /// Whether any record of the lease came since the start, and when the loop started: a starting instance
        /// claims only once it heard the lease (retained, it comes right after the subscription) or waited
        /// `silence` for it, so that a slow broker does not make it take the lease from a live holder.
        var heardAny = false
        var started: ContinuousClock.Instant?
    }

    private let view = Mutex(View())
    /// Measured takeovers: from the moment this instance knew the lease had lapsed to holding it.
    private let lastTakeover = Mutex<Duration?>(nil)

    init(group: String, instance: String, timeout: Duration, standing: Standing, logger: AgentLogger) {
        self.group = group
        self.instance = instance
        self.timeout = timeout
        self.standing = standing
        self.logger = logger
        leaseTopic = "thing-agent/groups/\(group)/lease"
    }

    /// A standby claims after this long without a record of a live holder.
    var silence: Duration { timeout * 0.7 }
    /// The active steps down when no renewal was acknowledged for this long.
    var holdWithoutAck: Duration { timeout / 2 }
    /// A claim is taken after this long with no claim that wins over it.
    var settle: Duration { min(.milliseconds(500), timeout / 10) }
    /// How often the loop looks and the active renews.
    var tick: Duration { max(.milliseconds(20), min(.milliseconds(500), timeout / 10)) }

    /// The subscriptions that bring the lease and the instances' announcements.
    var filters: [String] { [leaseTopic, Self.statusFilter] }

    // MARK: the receive path

    /// Takes the lease's records and the agents' announcements (network thread); false for other topics.
    func accept(_ message: MQTTMessage) -> Bool {
        if message.topic == leaseTopic {
            heardLease(message.payload)
            return true
        }
        guard message.topic.hasPrefix("thing-agent/agents/"), message.topic.hasSuffix("/status") else { return false }
        let id = String(message.topic.dropFirst("thing-agent/agents/".count).dropLast("/status".count))
        guard !id.isEmpty, !id.contains("/"), id != instance else { return true }
        let object = message.payload.isEmpty ? nil : (try? JSONParser.parse(message.payload))?.objectValue
        let online = object?["status"]?.stringValue == "online"
        view.withLock { view in
            if online { view.offline.remove(id) } else { view.offline.insert(id) }
        }
        if object?["group"]?.stringValue == group {
            standing.heard(member: Standing.Member(instance: id, online: online, role: online ? object?["role"]?.stringValue : nil,
                                                   since: online ? object?["since"]?.int64Value : nil))
        }
        return true
    }

    private func heardLease(_ payload: [UInt8]) {
        guard let object = (try? JSONParser.parse(payload))?.objectValue,
              let holder = object["holder"]?.stringValue, let since = object["since"]?.int64Value else { return }
        let released = object["released"]?.boolValue == true
        view.withLock { view in
            view.heardAny = true
            if released {
                view.holders[holder] = nil
                return
            }
            // A record naming this instance counts only for its own claim: one left by its last run is stale.
            if holder == instance, view.mine?.since != since { return }
            view.holders[holder] = (since, .now)
        }
    }

    // MARK: the loop

    /// Claims, holds and renews the lease until cancelled; `changed` runs after every change of role.
    func run(client: MQTTClient, changed: @escaping @Sendable (Bool) async -> Void) async {
        view.withLock { $0.started = .now }
        var lapsedAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let connected = client.state == .connected
            switch decide(now: now, connected: connected) {
            case .wait:
                lapsedAt = nil
            case .claim(let since):
                if lapsedAt == nil { lapsedAt = now }
                await publish(client, since: since)
            case .claiming:
                break
            case .take(let since):
                standing.set(active: true)
                let took = ContinuousClock.now - (lapsedAt ?? now)
                lastTakeover.withLock { $0 = took }
                lapsedAt = nil
                logger.notice("this instance is now the group's active one", metadata: [
                    "group": group, "instance": instance, "tookOver": took.seconds.fixed(3) + " s"])
                await publish(client, since: since)
                await changed(true)
            case .renew(let since):
                await publish(client, since: since)
            case .stepDown(let why, let holder):
                if standing.set(active: false) {
                    logger.warning("this instance stands by now", metadata: [
                        "group": group, "instance": instance, "reason": why, "holder": holder ?? "none"])
                    await changed(false)
                }
            }
            standing.heard(holder: standing.isActive ? instance : currentHolder(now: .now))
            try? await Task.sleep(for: tick)
        }
    }

    private enum Decision {
        case wait, claiming
        case claim(since: Int64)
        case take(since: Int64)
        case renew(since: Int64)
        case stepDown(String, holder: String?)
    }

    /// The winner of two records: the later `since`, then the greater name.
    private static func wins(_ a: (String, Int64), over b: (String, Int64)) -> Bool {
        (a.1, a.0) > (b.1, b.0)
    }

    /// Other instances whose record is live: heard within `silence`, and not said to be offline since.
    private func liveOthers(_ view: View, now: ContinuousClock.Instant) -> [(String, Int64)] {
        view.holders.compactMap { id, holder in
            id != instance && now - holder.heard < silence && !view.offline.contains(id) ? (id, holder.since) : nil
        }
    }

    private func currentHolder(now: ContinuousClock.Instant) -> String? {
        view.withLock { view in
            liveOthers(view, now: now).max { Self.wins($1, over: $0) }?.0
        }
    }

    private func decide(now: ContinuousClock.Instant, connected: Bool) -> Decision {
        view.withLock { view -> Decision in
            let others = liveOthers(view, now: now)
            let best = others.max { Self.wins($1, over: $0) }
            if standing.isMarkedActive, let mine = view.mine {
                if let best, Self.wins(best, over: (instance, mine.since)) {
                    view.mine = nil
                    return .stepDown("\(best.0) holds the lease", holder: best.0)
                }
                let lastAck = view.acknowledged ?? mine.claimed
                if now - lastAck > holdWithoutAck {
                    view.mine = nil
                    return .stepDown("no renewal acknowledged for \(holdWithoutAck)", holder: nil)
                }
                return .renew(since: mine.since)
            }
            if standing.isMarkedActive {
                // Active without a lease of its own cannot happen; stand by to be safe.
                return .stepDown("no lease", holder: best?.0)
            }
            if let mine = view.mine {
                if let best, Self.wins(best, over: (instance, mine.since)) {
                    view.mine = nil
                    return .wait
                }
                let heardMine = view.holders[instance]?.since == mine.since
                if heardMine, now - mine.claimed >= settle, connected { return .take(since: mine.since) }
                // No echo of the claim within the timeout (a lost connection): claim afresh later.
                if now - mine.claimed > timeout { view.mine = nil }
                return .claiming
            }
            guard best == nil, connected, view.heardAny || now - (view.started ?? now) >= silence else { return .wait }
            let since = Timestamp.now()
            view.mine = (since, now)
            view.acknowledged = nil
            return .claim(since: since)
        }
    }

    private func record(since: Int64, released: Bool = false) -> [UInt8] {
        let now = Timestamp.now()
        var object = JSONObject([("holder", .string(instance)), ("group", .string(group)), ("since", .integer(since)),
                                 ("renewed", .integer(now)),
                                 ("expires", .integer(now + Int64(timeout.seconds * 1000)))])
        if released { object["released"] = .bool(true) }
        return JSONValue.object(object).serializedBytes()
    }

    /// Publishes this instance's claim or renewal, retained at QoS 1; a renewal's acknowledgement keeps the lease.
    private func publish(_ client: MQTTClient, since: Int64) async {
        let payload = record(since: since)
        let topic = leaseTopic
        let acknowledged = await withTimeout(holdWithoutAck) { () async -> Bool in
            do {
                try await client.publish(topic, payload: payload, qos: .atLeastOnce, retain: true)
                return true
            } catch {
                return false
            }
        }
        if acknowledged {
            let mine = view.withLock { view in
                guard view.mine?.since == since else { return false }
                view.acknowledged = .now
                return true
            }
            if mine {
                standing.holds(until: .now() + .nanoseconds(Int(holdWithoutAck.components.seconds * 1_000_000_000
                    + holdWithoutAck.components.attoseconds / 1_000_000_000)))
            }
        }
    }

    /// At a graceful stop: an active instance gives the lease up, so that a standby takes over at once.
    func release(client: MQTTClient) async {
        guard standing.isMarkedActive, let since = view.withLock({ $0.mine?.since }) else { return }
        standing.set(active: false)
        try? await client.publish(leaseTopic, payload: record(since: since, released: true), qos: .atMostOnce,
                                  retain: true)
    }

    /// The time the last takeover took: from the moment the lease was known to have lapsed to holding it.
    var lastTakeoverTime: Duration? { lastTakeover.withLock { $0 } }
}
