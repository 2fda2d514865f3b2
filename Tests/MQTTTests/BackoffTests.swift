import MQTT
import Testing
import ThingAgent

/// Jittered delays are computed through Double: compare to the microsecond.
func close(_ a: Duration, _ b: Duration) -> Bool {
    a - b < .microseconds(1) && b - a < .microseconds(1)
}

@Suite("Reconnect backoff", .timeLimit(.minutes(1)))
struct BackoffTests {
    let backoff = ReconnectBackoff(minDelay: .milliseconds(100), maxDelay: .seconds(30))

    @Test("the ceiling doubles from the minimum and stops at the maximum", .timeLimit(.minutes(1)))
    func ceilingGrowsAndCaps() {
        #expect(backoff.ceiling(attempt: 0) == .milliseconds(100))
        #expect(backoff.ceiling(attempt: 1) == .milliseconds(200))
        #expect(backoff.ceiling(attempt: 4) == .milliseconds(1600))
        #expect(backoff.ceiling(attempt: 8) == .milliseconds(25600))
        #expect(backoff.ceiling(attempt: 9) == .seconds(30))
        #expect(backoff.ceiling(attempt: 10_000) == .seconds(30))
        #expect(backoff.ceiling(attempt: Int.max) == .seconds(30))
    }

    @Test("equal jitter stays between half the ceiling and the ceiling", .timeLimit(.minutes(1)))
    func equalJitter() {
        #expect(backoff.delay(attempt: 3, random: 0) == .milliseconds(400))
        #expect(close(backoff.delay(attempt: 3, random: 0.5), .milliseconds(600)))
        #expect(backoff.delay(attempt: 3, random: 0.999_999) <= .milliseconds(800))
        #expect(backoff.delay(attempt: 20, random: 0) == .seconds(15))
        // Half of the first ceiling is below the minimum: the minimum wins.
        #expect(backoff.delay(attempt: 0, random: 0) == .milliseconds(100))
    }

    @Test("full jitter spans zero to the ceiling but never goes below the minimum", .timeLimit(.minutes(1)))
    func fullJitter() {
        let full = ReconnectBackoff(minDelay: .milliseconds(100), maxDelay: .seconds(30), jitter: .full)
        #expect(full.delay(attempt: 5, random: 0) == .milliseconds(100))
        #expect(close(full.delay(attempt: 5, random: 0.5), .milliseconds(1600)))
        #expect(full.delay(attempt: 50, random: 0.999_999) <= .seconds(30))
        #expect(full.delay(attempt: 50, random: 0.999_999) > .seconds(29))
    }

    @Test("no jitter gives exactly the ceiling", .timeLimit(.minutes(1)))
    func noJitter() {
        let plain = ReconnectBackoff(minDelay: .seconds(1), maxDelay: .seconds(10), jitter: .none)
        #expect((0..<6).map { plain.delay(attempt: $0, random: 0.3) } == [1, 2, 4, 8, 10, 10].map { .seconds($0) })
    }

    @Test("random delays always fall in [min, max] and spread out", .timeLimit(.minutes(1)))
    func randomDelaysStayInBounds() {
        // Seeded (the package's SplitMix64) so that jittered delays are checked without flakiness.
        var generator = SeededGenerator(seed: 42)
        for jitter in [ReconnectBackoff.Jitter.full, .equal] {
            let policy = ReconnectBackoff(minDelay: .milliseconds(100), maxDelay: .seconds(2), jitter: jitter)
            var distinct = Set<Duration>()
            for attempt in 0..<200 {
                let delay = policy.delay(attempt: attempt % 12, using: &generator)
                #expect(delay >= .milliseconds(100) && delay <= .seconds(2))
                distinct.insert(delay)
            }
            #expect(distinct.count > 100, "jitter should spread retries of many clients apart")
        }
    }

    @Test("a maximum below the minimum is raised to the minimum", .timeLimit(.minutes(1)))
    func inconsistentBounds() {
        let odd = ReconnectBackoff(minDelay: .seconds(2), maxDelay: .seconds(1))
        #expect(odd.delay(attempt: 7, random: 0.9) == .seconds(2))
    }
}
