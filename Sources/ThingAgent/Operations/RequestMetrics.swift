import Synchronization
import ThingAgentCore

/// Requests this agent sent to devices, by kind and outcome, and how long they took (`thing_agent_requests_total`,
/// `thing_agent_request_duration_seconds`). Recorded by the requesting task when a request ends, never on the
/// receive path; the lock guards only this table.
final class RequestMetrics: Sendable {
    private let counts = Mutex<[Key: Int]>([:])
    let durations = Histogram(bounds: Histogram.requestBounds)

    struct Key: Hashable, Sendable {
        var kind: String
        var outcome: String
    }

    func record(_ outcome: RequestOutcome) {
        counts.withLock { $0[Key(kind: outcome.kind.rawValue, outcome: outcome.outcome), default: 0] += 1 }
        durations.record(outcome.elapsed)
    }

    var snapshot: [(key: Key, count: Int)] {
        counts.withLock { $0.map { ($0.key, $0.value) } }.sorted {
            ($0.key.kind, $0.key.outcome) < ($1.key.kind, $1.key.outcome)
        }
    }
}
