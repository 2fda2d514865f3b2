/// Reconnect delays: exponential growth from `minDelay`, randomised by jitter, always within [minDelay, maxDelay].
///
/// A pure value: the randomness comes in as a number in [0, 1), so the schedule can be checked in tests.
public struct ReconnectBackoff: Sendable, Equatable {
    public enum Jitter: Sendable, Equatable {
        /// Exactly the exponential ceiling.
        case none
        /// Uniform in [0, ceiling] ("full jitter"), then raised to `minDelay`.
        case full
        /// Half the ceiling plus uniform in [0, ceiling/2] ("equal jitter"): never less than half the ceiling.
        case equal
    }

    public var minDelay: Duration
    public var maxDelay: Duration
    public var jitter: Jitter

    public init(minDelay: Duration, maxDelay: Duration, jitter: Jitter = .equal) {
        self.minDelay = minDelay
        self.maxDelay = max(minDelay, maxDelay)
        self.jitter = jitter
    }

    /// The un-jittered delay before retry number `attempt` (0-based): minDelay × 2^attempt, capped at maxDelay.
    /// Computed by exact doubling, so it never overflows and whole values stay whole.
    public func ceiling(attempt: Int) -> Duration {
        var value = minDelay
        var remaining = attempt
        while remaining > 0 && value < maxDelay {
            value = value * 2
            remaining -= 1
        }
        return min(value, maxDelay)
    }

    /// The delay before retry number `attempt`, for a `random` in [0, 1).
    public func delay(attempt: Int, random: Double) -> Duration {
        let r = min(max(random, 0), 1)
        let top = ceiling(attempt: attempt)
        let raw: Duration
        switch jitter {
        case .none: raw = top
        case .full: raw = top * r
        case .equal: raw = top / 2 + (top / 2) * r
        }
        return min(max(raw, minDelay), maxDelay)
    }

    /// The delay before retry number `attempt`, drawing the jitter from `generator`.
    public func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        delay(attempt: attempt, random: Double.random(in: 0..<1, using: &generator))
    }
}

extension Duration {
    /// The duration in seconds as a Double.
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
