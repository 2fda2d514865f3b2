import JSON
import Synchronization

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
}

/// The daemon's multi-control links at work: hears every applied change (a `CacheWatch`), and when a member of a
/// link reports a new value for its code, sets every other member's code to it.
///
/// The rules (README, "Multi-control links"): only a change counts (a value that differs from the one cached
/// before; a member's first report ever is not propagated); a member that already has the value, or is being set
/// to it, gets no set; offline members and members whose model refuses the value are skipped and counted. A set the
/// link sent is remembered until the member reports that code, or the set fails (refused, no answer); a report
/// of the value set is an echo and triggers nothing, so two members never set each other back and forth. A set the
/// member accepted (code 0) is kept too: its report often comes after its answer, and that report is still the
/// echo of the link's own set (and another member's report in between must not send it the same value again).
final class LinkEngine: Sendable {
    private struct State {
        var links: [DeviceLink] = []
        /// Which links each member is in (indices into `links`).
        var byMember: [DeviceLink.Member: [Int]] = [:]
        /// Sets in flight or accepted and not yet reported back, with a token so that an older set's end does not
        /// touch a newer one.
        var pending: [DeviceLink.Member: Expected] = [:]
        var nextToken: UInt64 = 0

        mutating func load(_ links: [DeviceLink]) {
            self.links = links
            byMember = [:]
            for (index, link) in links.enumerated() {
                for member in link.members { byMember[member, default: []].append(index) }
            }
            pending = pending.filter { byMember[$0.key] != nil }
        }
    }

    /// A value a link set on a member, not reported back yet.
    private struct Expected {
        var value: JSONValue
        var token: UInt64
    }

    /// The agent whose sets the links send; weak, so that the engine does not keep its agent alive. Nil until
    /// the daemon runs (a journal replay at start-up propagates nothing).
    private struct Sender: Sendable {
        weak var agent: Agent?
    }

    private let state = Mutex(State())
    /// Whether any link exists: read without a lock on every change the receive path applies.
    private let hasLinks = Atomic<Bool>(false)
    /// Atomics, so that a metrics scrape takes no lock the receive path takes.
    private let propagations = Atomic<Int>(0), setsSent = Atomic<Int>(0), setsFailed = Atomic<Int>(0)
    private let skippedOffline = Atomic<Int>(0), outOfRange = Atomic<Int>(0), echoes = Atomic<Int>(0)
    private let sender = Mutex(Sender())
    private let cache: DeviceCache
    private let hub: EventHub
    private let logger: AgentLogger

    init(cache: DeviceCache, hub: EventHub, logger: AgentLogger) {
        self.cache = cache
        self.hub = hub
        self.logger = logger
    }

    var links: [DeviceLink] { state.withLock { $0.links } }
    var statistics: LinkStatistics {
        LinkStatistics(propagations: propagations.load(ordering: .relaxed), setsSent: setsSent.load(ordering: .relaxed),
                       setsFailed: setsFailed.load(ordering: .relaxed),
                       skippedOffline: skippedOffline.load(ordering: .relaxed),
                       outOfRange: outOfRange.load(ordering: .relaxed), echoes: echoes.load(ordering: .relaxed))
    }

    /// Takes the links as they now are (at start, and after every change to them).
    func load(_ links: [DeviceLink]) {
        state.withLock { $0.load(links) }
        hasLinks.store(!links.isEmpty, ordering: .releasing)
    }

    /// From now on member changes are propagated through `agent`.
    func start(_ agent: Agent) {
        sender.withLock { $0.agent = agent }
    }

    func stop() {
        sender.withLock { $0.agent = nil }
    }

    /// A finished replacement moved the faulty gateway's link members to the new gateway in the cache file (in the
    /// write of the re-linked sub-devices); the links in memory follow.
    func replaced(_ old: String, by new: String) {
        state.withLock { state in
            guard state.byMember.keys.contains(where: { $0.deviceId == old }) else { return }
            let moved = state.links.map { link in
                var members: [DeviceLink.Member] = []
                for member in link.members {
                    let next = member.deviceId == old ? DeviceLink.Member(deviceId: new, code: member.code) : member
                    if !members.contains(next) { members.append(next) }
                }
                return DeviceLink(name: link.name, members: members, createdAt: link.createdAt)
            }
            state.load(moved)
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
        guard !changes.properties.isEmpty, let agent = sender.withLock({ $0.agent }) else { return }
        for change in changes.properties where change.isValueChange && change.previous != nil {
            propagate(DeviceLink.Member(deviceId: device, code: change.code), change.value, agent)
        }
    }

    private struct Plan {
        var propagations: [LinkPropagation] = []
        var sets: [(member: DeviceLink.Member, token: UInt64)] = []
    }

    private func propagate(_ source: DeviceLink.Member, _ value: JSONValue, _ agent: Agent) {
        let plan = state.withLock { state -> Plan in
            var plan = Plan()
            guard let indices = state.byMember[source] else { return plan }
            if let pending = state.pending.removeValue(forKey: source), pending.value == value {
                echoes.add(1, ordering: .relaxed)
                return plan
            }
            var handled: Set<DeviceLink.Member> = [source]
            for index in indices {
                let link = state.links[index]
                var propagation = LinkPropagation(link: link.name, source: source.description, code: source.code,
                                                  value: value)
                for member in link.members where handled.insert(member).inserted {
                    if state.pending[member]?.value == value { continue }
                    let target = cache.device(member.deviceId)
                    if target?.properties[member.code]?.value == value { continue }
                    if target?.online == false {
                        propagation.offline.append(member.description)
                        continue
                    }
                    if let spec = agent.thingModel(for: member.deviceId)?.property(member.code),
                       (try? spec.validate(value)) == nil {
                        propagation.outOfRange.append(member.description)
                        continue
                    }
                    state.nextToken += 1
                    state.pending[member] = Expected(value: value, token: state.nextToken)
                    plan.sets.append((member, state.nextToken))
                    propagation.sent.append(member.description)
                }
                if !(propagation.sent.isEmpty && propagation.offline.isEmpty && propagation.outOfRange.isEmpty) {
                    propagations.add(1, ordering: .relaxed)
                    setsSent.add(propagation.sent.count, ordering: .relaxed)
                    skippedOffline.add(propagation.offline.count, ordering: .relaxed)
                    outOfRange.add(propagation.outOfRange.count, ordering: .relaxed)
                    plan.propagations.append(propagation)
                }
            }
            return plan
        }
        for propagation in plan.propagations {
            logger.debug("link propagated a change", metadata: [
                "link": propagation.link, "from": propagation.source, "value": value.serialized(),
                "sent": propagation.sent.joined(separator: ","), "offline": propagation.offline.joined(separator: ","),
                "outOfRange": propagation.outOfRange.joined(separator: ","),
            ])
        }
        hub.publish(plan.propagations.map { .linkPropagated(deviceId: source.deviceId, propagation: $0) })
        for (member, token) in plan.sets {
            Task {
                let outcome = await agent.sendPropertySet(deviceId: member.deviceId, [member.code: value])
                self.ended(member, token: token, succeeded: outcome.succeeded)
            }
        }
    }

    /// The set ended (answer or timeout). Accepted, its value is still expected back (the echo); failed, it is
    /// forgotten.
    private func ended(_ member: DeviceLink.Member, token: UInt64, succeeded: Bool) {
        guard !succeeded else { return }
        setsFailed.add(1, ordering: .relaxed)
        state.withLock { state in
            if state.pending[member]?.token == token { state.pending[member] = nil }
        }
    }
}
