import Synchronization
import ThingAgentCore

/// The API's memory of recent requests by client and `id`, so that one request is run once however often it
/// arrives. QoS 1 delivers at least once: a request whose PUBACK was lost (a reconnect, a storage hold) comes
/// again, and without this a `pair` would make two pairings and a `remove` run twice.
///
/// A copy that comes while the first still runs is dropped (the first one's answer goes to the same reply topic);
/// one that comes after it was answered gets that answer again. Requests without an `id` cannot be told apart
/// and are always run. Entries are kept for `window` and at most `capacity` of them, oldest forgotten first.
final class APIAnswerMemory: Sendable {
    enum Claim: Equatable {
        /// First seen: run it, then `remember` its answer (or `release` it when it was not run).
        case run
        /// Seen and still running: drop this copy.
        case running
        /// Seen and answered: send this answer again.
        case answered([UInt8])
    }

    private struct Entry {
        var answer: [UInt8]?
        let seen: ContinuousClock.Instant
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Keys in the order first seen, for forgetting the oldest.
        var order: [String] = []
        var head = 0
    }

    let window: Duration
    let capacity: Int
    private let state = Mutex(State())

    init(window: Duration = .seconds(600), capacity: Int = 8192) {
        self.window = window
        self.capacity = max(1, capacity)
    }

    static func key(client: String, id: String) -> String { client + "\u{0}" + id }

    /// Claims `key` for running, or says what became of its first copy.
    func claim(_ key: String, now: ContinuousClock.Instant) -> Claim {
        state.withLock { state in
            forgetOld(&state, now: now)
            if let entry = state.entries[key] {
                return entry.answer.map(Claim.answered) ?? .running
            }
            state.entries[key] = Entry(answer: nil, seen: now)
            state.order.append(key)
            return .run
        }
    }

    /// Keeps the answer of a claimed request for its copies.
    func remember(_ key: String, answer: [UInt8]) {
        state.withLock { state in
            guard let seen = state.entries[key]?.seen else { return }
            state.entries[key] = Entry(answer: answer, seen: seen)
        }
    }

    /// Forgets a claim whose request was not run (refused by a rate limit), so that sending it again runs it.
    func release(_ key: String) {
        state.withLock { state in _ = state.entries.removeValue(forKey: key) }
    }

    var count: Int { state.withLock { $0.entries.count } }

    private func forgetOld(_ state: inout State, now: ContinuousClock.Instant) {
        while state.head < state.order.count {
            let key = state.order[state.head]
            // Room for one more, and the oldest still within the window: nothing more to forget.
            if let entry = state.entries[key], now - entry.seen < window, state.entries.count < capacity { break }
            state.entries[key] = nil
            state.head += 1
        }
        // The forgotten keys' slots are dropped once they are half the list.
        if state.head > 0, state.head * 2 >= state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }
}
