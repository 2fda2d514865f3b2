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
    public func ceiling(attempt: Int) -> Duration {
        let exponent = Double(min(max(attempt, 0), 64))
        let seconds = min(minDelay.seconds * powerOfTwo(exponent), maxDelay.seconds)
        return .seconds(seconds)
    }

    /// The delay before retry number `attempt`, for a `random` in [0, 1).
    public func delay(attempt: Int, random: Double) -> Duration {
        let r = min(max(random, 0), 1)
        let top = ceiling(attempt: attempt).seconds
        let raw: Double
        switch jitter {
        case .none: raw = top
        case .full: raw = top * r
        case .equal: raw = top / 2 + top / 2 * r
        }
        return .seconds(min(max(raw, minDelay.seconds), maxDelay.seconds))
    }

    /// The delay before retry number `attempt`, drawing the jitter from `generator`.
    public func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        delay(attempt: attempt, random: Double.random(in: 0..<1, using: &generator))
    }
}

/// 2^x for a small non-negative whole x, exactly (no libm needed).
private func powerOfTwo(_ x: Double) -> Double {
    var result = 1.0
    var n = Int(x)
    while n > 0 { result *= 2; n -= 1 }
    return result
}

extension Duration {
    /// The duration in seconds as a Double.
    var seconds: Double {
        let c = components
        return Double(c.seconds) + Double(c.attoseconds) / 1e18
    }
}
