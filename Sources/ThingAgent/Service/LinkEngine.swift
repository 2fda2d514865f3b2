import JSON
import Synchronization
import ThingAgentCore

/// Counters of the multi-control links since the daemon started (`Agent.linkStatistics`).
public struct LinkStatistics: Sendable, Equatable {
    /// Member changes that made a link set at least one other member, or leave one out.
    public var propagations = 0
    /// Sets a link sent, and how many of those failed (refused, no answer, not sent).
    public var setsSent = 0
    public var setsFailed = 0
    /// Members left out because they were known to be offline.
    public var skippedOffline = 0
    /// Members left out because their thing model refuses the value.
    public var outOfRange = 0
    /// Reports of a value a link had just set on that member: not propagated again.
    public var echoes = 0
    /// Sets never sent because a newer value for the same member came first (only the newest waits behind the set
    /// in flight), or because the member had the value by its turn.
    public var superseded = 0
    /// Accepted sets whose member never reported the value within the grace: no longer waited for.
    public var expired = 0
    /// Value fights: a link paused because its members kept answering its sets with other values.
    public var fights = 0
    /// Member changes not propagated because their link was paused by a fight.
    public var paused = 0
}

/// The daemon's multi-control links at work: hears every applied change (a `CacheWatch`), and when a member of a
/// link reports a new value for its code, sets every other member's code to it.
///
/// The rules (docs/groups-scenes-links.md, "Multi-control links"): only a change counts (a value that differs, numbers by value, from the
/// one cached before; a member's first report ever is not propagated); a member that already has the value, or
/// will have it once the sets asked of it are done, gets no set; offline members and members whose model refuses
/// the value are skipped and counted. Each member's sets go out one at a time and in order, the newest value
/// waiting behind the one in flight (`LinkMemberSets`); a report of a value the link set on that member is its
/// echo and triggers nothing, so two members never set each other back and forth. A set is expected back until
/// that report, until it fails, or until `grace` after its accepted answer.
final class LinkEngine: Sendable {
    private struct State {
        var links: [DeviceLink] = []
        /// Which links each member is in (indices into `links`).
        var byMember: [DeviceLink.Member: [Int]] = [:]
        var members: [DeviceLink.Member: LinkMemberSets] = [:]
        var nextToken: UInt64 = 0
        /// Each link's value fights: contradictions seen, and the pause they caused (by link name).
        var fights: [String: LinkFight] = [:]

        mutating func load(_ links: [DeviceLink]) {
            self.links = links
            byMember = [:]
            for (index, link) in links.enumerated() {
                for member in link.members { byMember[member, default: []].append(index) }
            }
            // A member still being sent to keeps its state until its sender is done.
            members = members.filter { byMember[$0.key] != nil || $0.value.sending }
            let names = Set(links.map(\.name))
            fights = fights.filter { names.contains($0.key) }
        }
    }

    /// The agent whose models the links check and whose sets they send; weak, so that the engine does not keep its
    /// agent alive. Nil until the daemon is connected (a journal replay at start-up propagates nothing).
    private struct Sender: Sendable {
        weak var agent: Agent?
    }

    private let state = Mutex(State())
    /// Whether any link exists: read without a lock on every change the receive path applies.
    private let hasLinks = Atomic<Bool>(false)
    /// Atomics, so that a metrics scrape takes no lock the receive path takes.
    private let propagations = Atomic<Int>(0), setsSent = Atomic<Int>(0), setsFailed = Atomic<Int>(0)
    private let skippedOffline = Atomic<Int>(0), outOfRange = Atomic<Int>(0), echoes = Atomic<Int>(0)
    private let superseded = Atomic<Int>(0), expired = Atomic<Int>(0)
    private let fights = Atomic<Int>(0), paused = Atomic<Int>(0)
    private let sender = Mutex(Sender())
    /// Members with a set to send, in the order they got one; `run` sends them.
    private let ready: AsyncStream<DeviceLink.Member>
    private let readyInput: AsyncStream<DeviceLink.Member>.Continuation
    private let cache: DeviceCache
    private let hub: EventHub
    private let logger: AgentLogger
    private let grace: Duration
    private let models: CurrentModels

    /// `grace`: how long after an accepted answer the member's report of the value is still waited for.
    /// `models`: what a replacement's moved members are checked against again.
    init(cache: DeviceCache, hub: EventHub, logger: AgentLogger, grace: Duration,
         models: CurrentModels = CurrentModels(ThingModels())) {
        self.models = models
        self.cache = cache
        self.hub = hub
        self.logger = logger
        self.grace = grace
        (ready, readyInput) = AsyncStream.makeStream(of: DeviceLink.Member.self)
    }

    var links: [DeviceLink] { state.withLock { $0.links } }
    var statistics: LinkStatistics {
        LinkStatistics(propagations: propagations.load(ordering: .relaxed), setsSent: setsSent.load(ordering: .relaxed),
                       setsFailed: setsFailed.load(ordering: .relaxed),
                       skippedOffline: skippedOffline.load(ordering: .relaxed),
                       outOfRange: outOfRange.load(ordering: .relaxed), echoes: echoes.load(ordering: .relaxed),
                       superseded: superseded.load(ordering: .relaxed), expired: expired.load(ordering: .relaxed),
                       fights: fights.load(ordering: .relaxed), paused: paused.load(ordering: .relaxed))
    }

    /// Whether the links expect nothing more of `member`: no set waiting, in flight, or accepted and not yet
    /// reported back within its grace.
    func isSettled(_ member: DeviceLink.Member) -> Bool {
        state.withLock { state in
            guard var sets = state.members[member] else { return true }
            expired.add(sets.expire(now: .now), ordering: .relaxed)
            state.members[member] = sets.isIdle ? nil : sets
            return sets.isIdle
        }
    }

    /// Takes the links as they now are (at start, and after every change to them).
    func load(_ links: [DeviceLink]) {
        state.withLock { $0.load(links) }
        hasLinks.store(!links.isEmpty, ordering: .releasing)
    }

    /// From now on member changes are propagated through `agent` (sent once `run` runs).
    func start(_ agent: Agent) {
        sender.withLock { $0.agent = agent }
    }

    func stop() {
        sender.withLock { $0.agent = nil }
        readyInput.finish()
    }

    /// Sends the links' sets until cancelled (or `stop`): each member's in order, one at a time; members in
    /// parallel, so that one that does not answer holds up only its own.
    func run(_ agent: Agent) async {
        await withDiscardingTaskGroup { group in
            for await member in ready {
                group.addTask { await self.send(to: member, agent) }
            }
            group.cancelAll()
        }
    }

    /// A finished replacement moved the faulty gateway's link members to the new gateway in the cache file (in the
    /// write of the re-linked sub-devices); the links in memory follow, by the same rules (`DeviceLink.replacing`):
    /// a moved member the new gateway's model refuses is dropped, a link left with fewer than two members goes.
    func replaced(_ old: String, by new: String) {
        let product = { [cache] (device: String) in cache.device(device)?.info.productId }
        let sameProduct = product(new) == product(old)
        let (kept, dropped, dissolved) = state.withLock { state -> ([DeviceLink], [DroppedLinkMember], [String]) in
            guard state.byMember.keys.contains(where: { $0.deviceId == old }) else { return (state.links, [], []) }
            var kept: [DeviceLink] = [], dropped: [DroppedLinkMember] = [], dissolved: [String] = []
            for link in state.links {
                guard link.members.contains(where: { $0.deviceId == old }) else {
                    kept.append(link)
                    continue
                }
                let (next, refused) = link.replacing(old, by: new, sameProduct: sameProduct) { [models] device in
                    models.model(for: product(device))
                }
                dropped += refused
                if let next { kept.append(next) } else { dissolved.append(link.name) }
            }
            state.load(kept)
            return (kept, dropped, dissolved)
        }
        hasLinks.store(!kept.isEmpty, ordering: .releasing)
        for member in dropped {
            logger.warning("a gateway replacement dropped a link member the new gateway's thing model refuses",
                           metadata: ["link": member.link, "member": "\(member.member)", "reason": member.reason])
        }
        for name in dissolved {
            logger.warning("a gateway replacement left a link with fewer than two members: it is deleted",
                           metadata: ["link": name, "old": old, "new": new])
        }
    }

    /// A removed device leaves every link at once (the flush that deletes its rows takes it out of the file's):
    /// a link left with fewer than two members goes.
    func removed(_ device: String) {
        state.withLock { state in
            guard state.byMember.keys.contains(where: { $0.deviceId == device }) else { return }
            let kept = state.links.compactMap { link -> DeviceLink? in
                let members = link.members.filter { $0.deviceId != device }
                return members.count < 2 ? nil : DeviceLink(name: link.name, members: members, createdAt: link.createdAt)
            }
            state.load(kept)
            hasLinks.store(!kept.isEmpty, ordering: .releasing)
        }
    }

    func changed(_ changes: AppliedChanges, on device: String) {
        guard hasLinks.load(ordering: .acquiring) else { return }
        if let old = changes.replacedGateway { replaced(old, by: device) }
        // In a group, only the active instance propagates (a standby hears the same changes and keeps still).
        guard !changes.properties.isEmpty, let agent = sender.withLock({ $0.agent }), agent.standing.isActive else {
            return
        }
        for change in changes.properties {
            let member = DeviceLink.Member(deviceId: device, code: change.code)
            // A repeat of the cached value (20.0 after 20 too) is no change, but may still be an echo.
            let isChange = change.previous.map { !$0.isSameValue(as: change.value) } ?? false
            propagate(member, change.value, isChange: isChange, agent)
        }
    }

    private struct Plan {
        var propagations: [LinkPropagation] = []
        var ready: [DeviceLink.Member] = []
        /// Links this change paused: their members fight over the value.
        var paused: [String] = []
    }

    private func propagate(_ source: DeviceLink.Member, _ value: JSONValue, isChange: Bool, _ agent: Agent) {
        let now = ContinuousClock.now
        let plan = state.withLock { state -> Plan in
            var plan = Plan()
            guard let indices = state.byMember[source] else { return plan }
            var own = state.members[source] ?? LinkMemberSets()
            expired.add(own.expire(now: now), ordering: .relaxed)
            let outstanding = !own.sent.isEmpty
            let echo = own.takeEcho(value)
            // A member that answers the link's set with another value of its own contradicts it: a few of those
            // in a row are a fight (two members that each turn a set into another value would otherwise chase
            // each other for good), and the link pauses.
            if isChange, !echo, outstanding {
                for index in indices {
                    let name = state.links[index].name
                    if state.fights[name, default: LinkFight()].contradicted(now: now) {
                        fights.add(1, ordering: .relaxed)
                        plan.paused.append(name)
                    }
                }
            }
            if isChange, !echo, own.waiting != nil {
                // The member's own newer change wins over the value that was still to be sent to it.
                own.waiting = nil
                superseded.add(1, ordering: .relaxed)
            }
            state.members[source] = own.isIdle ? nil : own
            if echo, isChange { echoes.add(1, ordering: .relaxed) }
            guard isChange, !echo else { return plan }
            var handled: Set<DeviceLink.Member> = [source]
            for index in indices {
                let link = state.links[index]
                if state.fights[link.name]?.isPaused(now: now) == true {
                    paused.add(1, ordering: .relaxed)
                    continue
                }
                var propagation = LinkPropagation(link: link.name, source: source.description, code: source.code,
                                                  value: value)
                for member in link.members where handled.insert(member).inserted {
                    var sets = state.members[member] ?? LinkMemberSets()
                    expired.add(sets.expire(now: now), ordering: .relaxed)
                    let target = cache.device(member.deviceId)
                    if sets.expected(cached: target?.properties[member.code]?.value)?.isSameValue(as: value) == true {
                        state.members[member] = sets.isIdle ? nil : sets
                        continue
                    }
                    if target?.online == false {
                        propagation.offline.append(member.description)
                        continue
                    }
                    let spec = agent.thingModel(for: member.deviceId)?.property(member.code)
                    let sent = value.linkForm(for: spec)
                    if let spec, (try? spec.validate(sent)) == nil {
                        propagation.outOfRange.append(member.description)
                        continue
                    }
                    if sets.waiting != nil { superseded.add(1, ordering: .relaxed) }
                    sets.waiting = sent
                    if !sets.sending {
                        sets.sending = true
                        plan.ready.append(member)
                    }
                    state.members[member] = sets
                    propagation.sent.append(member.description)
                }
                if !(propagation.sent.isEmpty && propagation.offline.isEmpty && propagation.outOfRange.isEmpty) {
                    propagations.add(1, ordering: .relaxed)
                    skippedOffline.add(propagation.offline.count, ordering: .relaxed)
                    outOfRange.add(propagation.outOfRange.count, ordering: .relaxed)
                    plan.propagations.append(propagation)
                }
            }
            return plan
        }
        for name in plan.paused {
            logger.warning("link paused: its members keep answering its sets with other values", metadata: [
                "link": name, "member": source.description, "value": value.serialized(),
                "seconds": "\(Int(LinkFight.pause.seconds))",
            ])
        }
        for propagation in plan.propagations {
            logger.debug("link propagated a change", metadata: [
                "link": propagation.link, "from": propagation.source, "value": value.serialized(),
                "sent": propagation.sent.joined(separator: ","), "offline": propagation.offline.joined(separator: ","),
                "outOfRange": propagation.outOfRange.joined(separator: ","),
            ])
        }
        hub.publish(plan.propagations.map { .linkPropagated(deviceId: source.deviceId, propagation: $0) })
        for member in plan.ready { readyInput.yield(member) }
    }

    /// Sends `member` its waiting value, then the value that came meanwhile, until none waits.
    private func send(to member: DeviceLink.Member, _ agent: Agent) async {
        while let (value, token) = next(for: member).map({ ($0.value, $0.token) }) {
            let outcome = await agent.sendPropertySet(deviceId: member.deviceId, [member.code: value])
            ended(member, token: token, succeeded: outcome.succeeded)
        }
    }

    /// The value to send `member` now, registered as sent; nil (and the sender done) when none waits, or when the
    /// member has it by now.
    private func next(for member: DeviceLink.Member) -> (value: JSONValue, token: UInt64)? {
        state.withLock { state in
            guard var sets = state.members[member] else { return nil }
            defer { state.members[member] = sets.isIdle ? nil : sets }
            guard !Task.isCancelled, let value = sets.waiting else {
                sets.sending = false
                sets.waiting = nil
                return nil
            }
            sets.waiting = nil
            let cached = cache.device(member.deviceId)?.properties[member.code]?.value
            if sets.expected(cached: cached)?.isSameValue(as: value) == true {
                superseded.add(1, ordering: .relaxed)
                sets.sending = false
                return nil
            }
            state.nextToken += 1
            sets.sent.append(LinkMemberSets.Sent(value: value, token: state.nextToken))
            setsSent.add(1, ordering: .relaxed)
            return (value, state.nextToken)
        }
    }

    /// The set ended (answer or timeout). Accepted, its value is expected back for `grace`; failed, it is forgotten.
    private func ended(_ member: DeviceLink.Member, token: UInt64, succeeded: Bool) {
        if !succeeded { setsFailed.add(1, ordering: .relaxed) }
        let expires = ContinuousClock.now + grace
        state.withLock { state in
            guard var sets = state.members[member] else { return }
            if succeeded { sets.accepted(token, expires: expires) } else { sets.failed(token) }
            state.members[member] = sets.isIdle ? nil : sets
        }
    }
}
