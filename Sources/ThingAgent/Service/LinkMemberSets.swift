import JSON
import ThingAgentCore

/// What the multi-control links asked of one member and have not yet seen come back (`LinkEngine`).
///
/// Sets go to a member one at a time, in order: while one is in flight, only the newest value waits behind it
/// (an older waiting value is superseded, never sent). Every set sent is kept until the member reports its value
/// (the echo), the set fails, or a grace after its accepted answer runs out: a device may answer code 0 and keep
/// its state (a child lock, an interlock, a lost report), and its set must not stay expected for good.
struct LinkMemberSets {
    struct Sent {
        var value: JSONValue
        var token: UInt64
        /// Set once the member accepted the set: after this its report is no longer waited for.
        var expires: ContinuousClock.Instant?
    }

    /// Oldest first.
    var sent: [Sent] = []
    /// The newest value still to send, behind the set in flight.
    var waiting: JSONValue?
    /// Whether this member's sender is at work (one set in flight at a time).
    var sending = false

    var isIdle: Bool { sent.isEmpty && waiting == nil && !sending }

    /// The value the member has once everything asked of it is done: what "already has the value" is decided on.
    func expected(cached: JSONValue?) -> JSONValue? {
        waiting ?? sent.last?.value ?? cached
    }

    /// Forgets accepted sets whose report did not come within their grace; returns how many.
    mutating func expire(now: ContinuousClock.Instant) -> Int {
        let before = sent.count
        sent.removeAll { $0.expires.map { $0 <= now } ?? false }
        return before - sent.count
    }

    /// A report of `value` by the member: when a set of that value was sent, that set and every older one are done
    /// (the member works through its sets in order) and the report is their echo.
    mutating func takeEcho(_ value: JSONValue) -> Bool {
        guard let index = sent.firstIndex(where: { $0.value.isSameValue(as: value) }) else { return false }
        sent.removeSubrange(...index)
        return true
    }

    mutating func accepted(_ token: UInt64, expires: ContinuousClock.Instant) {
        if let index = sent.firstIndex(where: { $0.token == token }) { sent[index].expires = expires }
    }

    mutating func failed(_ token: UInt64) {
        sent.removeAll { $0.token == token }
    }
}

/// One link's value fights (`LinkEngine`): a member that reports another value while a set of the link is still
/// expected back contradicts the link. `strikes` contradictions within `window` are a fight: the link pauses for
/// `pause` (member changes are not propagated), then works again; a fight that starts again pauses it again.
struct LinkFight {
    static let strikes = 3
    static let window: Duration = .seconds(10)
    static let pause: Duration = .seconds(60)

    private var contradictions: [ContinuousClock.Instant] = []
    private var pausedUntil: ContinuousClock.Instant?

    func isPaused(now: ContinuousClock.Instant) -> Bool {
        pausedUntil.map { now < $0 } ?? false
    }

    /// Counts a contradiction; true when it makes a fight (the link pauses from now on).
    mutating func contradicted(now: ContinuousClock.Instant) -> Bool {
        guard !isPaused(now: now) else { return false }
        contradictions.removeAll { now - $0 >= Self.window }
        contradictions.append(now)
        guard contradictions.count >= Self.strikes else { return false }
        contradictions = []
        pausedUntil = now + Self.pause
        return true
    }
}

extension JSONValue {
    /// Equal as a link sees values: numbers by their value (a device reporting `20.0` has the value 20), everything
    /// else as `==`.
    func isSameValue(as other: JSONValue) -> Bool {
        switch (self, other) {
        case (.integer, .double), (.double, .integer), (.double, .double):
            guard let a = doubleValue, let b = other.doubleValue else { return false }
            return a == b
        default:
            return self == other
        }
    }

    /// The value in the form a member's model takes: an integral number as an integer for a `value` code
    /// (`20.0` from one member is set as `20` on another).
    func linkForm(for spec: PropertySpec?) -> JSONValue {
        guard case .double(let number) = self, case .value = spec?.kind, number.rounded() == number,
              abs(number) < 9.0e18 else { return self }
        return .integer(Int64(number))
    }
}
