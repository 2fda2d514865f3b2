import Dispatch
import Synchronization
import ThingAgentCore

/// Whether this instance acts for the fleet now: the one place every acting part asks (the API, the links, the
/// offline warnings, the stall verdicts, the event feed, the replies the dialects owe devices).
///
/// An agent without `agentGroup` always acts. In a group, `GroupLease` moves it between active and standby; a
/// standby keeps the cache as the active does (it ingests everything) and acts on nothing.
public final class Standing: Sendable {
    /// The group, nil for an agent that acts alone.
    public let group: String?
    /// This instance: its client id.
    public let instance: String
    private let active: Atomic<Bool>
    /// Uptime (ns) until which the lease is known to hold: its last acknowledged renewal plus the time the active
    /// one keeps it without another. Past it this instance no longer acts, even before its lease loop noticed (a
    /// process frozen and thawed, a host that slept).
    private let validUntil: Atomic<UInt64>
    /// Agent time (ms) this instance became active or standby.
    private let changedAt: Atomic<Int64>
    /// Who holds the lease as far as this instance knows (itself while active), and the members heard.
    private let known = Mutex<(holder: String?, members: [String: Member])>((nil, [:]))
    /// Times this instance took over the lease.
    private let takeovers = Atomic<Int>(0)

    /// An instance of the group as its announcement says (`thing-agent/agents/<id>/status`).
    public struct Member: Sendable, Equatable {
        public var instance: String
        public var online: Bool
        /// "active" or "standby" (nil while it said neither, as when it is offline).
        public var role: String?
        /// Agent time (ms) it took that role.
        public var since: Int64?
    }

    /// `group` nil: an agent that acts alone (active from the start). In a group an instance starts as a standby.
    init(group: String?, instance: String) {
        self.group = group
        self.instance = instance
        active = Atomic(group == nil)
        validUntil = Atomic(group == nil ? .max : 0)
        changedAt = Atomic(Timestamp.now())
        known.withLock { $0.holder = group == nil ? instance : nil }
    }

    /// True while this instance acts for the fleet.
    public var isActive: Bool {
        // Asked for every reply and event: an agent alone reads no clock for it.
        group == nil
            || active.load(ordering: .acquiring)
                && DispatchTime.now().uptimeNanoseconds < validUntil.load(ordering: .acquiring)
    }

    /// Whether the lease loop made this instance the active one (its lease may have lapsed since: `isActive`).
    var isMarkedActive: Bool { active.load(ordering: .acquiring) }

    /// The lease holds until `deadline` (an acknowledged renewal).
    func holds(until deadline: DispatchTime) {
        validUntil.store(deadline.uptimeNanoseconds, ordering: .releasing)
    }

    /// "active" or "standby".
    public var role: String { isActive ? "active" : "standby" }

    /// Agent time (ms) this instance took its current role.
    public var since: Int64 { changedAt.load(ordering: .relaxed) }

    /// The instance that holds the lease, as far as this one knows.
    public var holder: String? { known.withLock { $0.holder } }

    /// The instances of the group heard (their announcements), this one included, by name.
    public var members: [Member] {
        let (me, others) = (Member(instance: instance, online: true, role: role, since: since),
                            known.withLock { $0.members })
        var all = others
        all[instance] = me
        return all.values.sorted { $0.instance < $1.instance }
    }

    public var takeoverCount: Int { takeovers.load(ordering: .relaxed) }

    /// Moves this instance to `active` (or standby); false when it already was.
    @discardableResult
    func set(active value: Bool) -> Bool {
        if !value { validUntil.store(0, ordering: .releasing) }
        guard active.exchange(value, ordering: .acquiringAndReleasing) != value else { return false }
        changedAt.store(Timestamp.now(), ordering: .relaxed)
        if value {
            takeovers.add(1, ordering: .relaxed)
            known.withLock { $0.holder = instance }
        }
        return true
    }

    func heard(holder: String?) {
        known.withLock { $0.holder = holder }
    }

    func heard(member: Member) {
        guard member.instance != instance else { return }
        known.withLock { $0.members[member.instance] = member }
    }
}
