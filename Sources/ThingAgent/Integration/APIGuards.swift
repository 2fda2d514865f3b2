import Synchronization
import ThingAgentCore

/// Where the API may answer: only under the configured reply prefix.
enum ReplyTopics {
    /// The client a reply topic belongs to (its first level below `prefix`); nil when the topic is not under the
    /// prefix, names no client, or holds a wildcard.
    static func client(of topic: String, prefix: String) -> String? {
        guard topic.hasPrefix(prefix), !topic.contains("+"), !topic.contains("#") else { return nil }
        let rest = topic.dropFirst(prefix.count)
        let client = rest.prefix { $0 != "/" }
        return client.isEmpty ? nil : String(client)
    }
}

/// Requests per second per client, as a token bucket: a client may send `rate` requests at once (at least one),
/// then `rate` per second. 0 is no limit.
final class APIRateLimiter: Sendable {
    let rate: Double
    private let capacity: Double
    /// Clients beyond this many: the idle ones (full buckets) are forgotten, so made-up client names cannot grow
    /// the table without bound.
    private let maxClients: Int
    private struct Bucket {
        var tokens: Double
        var refilled: ContinuousClock.Instant
    }
    private let buckets = Mutex<[String: Bucket]>([:])

    init(rate: Double, maxClients: Int = 10_000) {
        self.rate = rate
        capacity = max(1, rate)
        self.maxClients = maxClients
    }

    /// Takes one token from `client`'s bucket: nil when it had one, else the seconds until it has one again
    /// (the answer's `retryAfter`).
    func take(_ client: String, now: ContinuousClock.Instant) -> Double? {
        guard rate > 0 else { return nil }
        return buckets.withLock { buckets in
            var bucket = buckets[client] ?? Bucket(tokens: capacity, refilled: now)
            bucket.tokens = min(capacity, bucket.tokens + (now - bucket.refilled).seconds * rate)
            bucket.refilled = now
            let wait: Double? = bucket.tokens >= 1 ? nil : (1 - bucket.tokens) / rate
            if wait == nil { bucket.tokens -= 1 }
            if buckets[client] == nil, buckets.count >= maxClients { forgetIdle(&buckets, now: now) }
            buckets[client] = bucket
            return wait
        }
    }

    /// Whether `client`'s bucket had a token (and takes it).
    func allow(_ client: String, now: ContinuousClock.Instant) -> Bool {
        take(client, now: now) == nil
    }

    private func forgetIdle(_ buckets: inout [String: Bucket], now: ContinuousClock.Instant) {
        buckets = buckets.filter { $0.value.tokens + (now - $0.value.refilled).seconds * rate < capacity }
        // Every client busy: start over rather than grow (each then gets one burst more).
        if buckets.count >= maxClients { buckets.removeAll(keepingCapacity: true) }
    }
}
