import Synchronization

/// Matches answers to requests by `msgId` and ends each request exactly once: answer, timeout, not sent or cancel.
/// The first outcome wins; anything after it is ignored.
///
/// A request is registered before it is published, because the answer may arrive before the publish is even
/// acknowledged; an outcome that comes before the sender waits is kept for it.
final package class RequestTracker: Sendable {
    package let limit: Int
    /// The share of `limit` one owner (`RequestOwner.current`, an API client) may hold.
    package let ownerLimit: Int
    /// How many requests that ended without an answer are remembered, so that a late answer can be told
    /// apart from one nobody ever asked for.
    static package let rememberedUnanswered = 1024

    package typealias Outcome = Result<Response, RequestError>

    /// What became of an answer handed to `resolve`.
    package enum Resolution: Equatable {
        /// Its request was waiting and now has it.
        case delivered
        /// Its request had already ended (timed out or cancelled); the answer is dropped.
        case late
        /// No request of this agent has this `msgId`, device and kind (or it was answered already).
        case unknown
    }

    private struct Pending {
        let deviceId: String
        let kind: RequestKind
        let owner: String?
        var outcome: Outcome?
        var continuation: CheckedContinuation<Outcome, Never>?
    }

    private struct Ended {
        let msgId: String
        let deviceId: String
        let kind: RequestKind
    }

    private struct State: ~Copyable {
        var pending: [String: Pending] = [:]
        /// Pending requests per owner; an owner with none is removed.
        var owned: [String: Int] = [:]
        var counter: UInt64
        /// Ring of requests that ended without an answer, oldest overwritten first.
        var unanswered: [Ended] = []
        var nextSlot = 0
    }

    private let state: Mutex<State>

    package init(limit: Int, ownerLimit: Int? = nil) {
        self.limit = max(1, limit)
        self.ownerLimit = max(1, ownerLimit ?? limit)
        // A random start keeps ids unique across restarts and between the daemon and CLI calls (which all hear
        // every answer), so an answer to another client's or an old request never matches a new one.
        state = Mutex(State(counter: UInt64.random(in: 1...(UInt64(1) << 40))))
    }

    package var inFlight: Int { state.withLock { $0.pending.count } }

    /// Whether a caller is parked in `wait` for `msgId` (tests use it to reach the waiting path for sure).
    package func isWaiting(_ msgId: String) -> Bool {
        state.withLock { $0.pending[msgId]?.continuation != nil }
    }

    /// Requests pending for `owner`.
    package func inFlight(owner: String) -> Int { state.withLock { $0.owned[owner] ?? 0 } }

    /// Registers a request and returns its `msgId` (at most 10 characters, within docs/protocol.md's 32).
    /// Made for an owner (`RequestOwner.current`), it also counts against that owner's share, `ownerLimit`.
    package func register(deviceId: String, kind: RequestKind) throws(RequestError) -> String {
        let owner = RequestOwner.current
        let result: Result<String, RequestError> = state.withLock { state in
            guard state.pending.count < limit else { return .failure(.tooManyInFlight(limit: limit)) }
            if let owner {
                let held = state.owned[owner] ?? 0
                guard held < ownerLimit else { return .failure(.tooManyInFlight(limit: ownerLimit)) }
                state.owned[owner] = held + 1
            }
            state.counter &+= 1
            let id = "t" + String(state.counter, radix: 36)
            state.pending[id] = Pending(deviceId: deviceId, kind: kind, owner: owner)
            return .success(id)
        }
        return try result.get()
    }

    /// Removes a pending request, and its owner's count with it.
    private static func remove(_ msgId: String, from state: inout State) {
        guard let removed = state.pending.removeValue(forKey: msgId), let owner = removed.owner else { return }
        let left = (state.owned[owner] ?? 1) - 1
        state.owned[owner] = left > 0 ? left : nil
    }

    /// Waits for the outcome of `msgId`: its answer (whatever its code), a timeout, not sent, or cancelled.
    /// The timeout counts from this call; cancelling the calling task ends the request as `.cancelled`.
    package func wait(for msgId: String, timeout: Duration) async -> Outcome {
        await withTimeout(timeout) {
            await self.outcome(of: msgId)
        } expire: {
            self.end(msgId) { .failure(.timeout(deviceId: $0.deviceId, request: $0.kind.rawValue, seconds: timeout.seconds)) }
        }
    }

    /// Parks until `msgId` has its outcome; cancelling the calling task ends the request as `.cancelled`.
    private func outcome(of msgId: String) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: Outcome? = state.withLock { state in
                    guard var pending = state.pending[msgId] else { return .failure(.cancelled) }
                    if let outcome = pending.outcome {
                        Self.remove(msgId, from: &state)
                        return outcome
                    }
                    pending.continuation = continuation
                    state.pending[msgId] = pending
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            end(msgId) { _ in .failure(.cancelled) }
        }
    }

    /// Hands an answer to its request, when one of this device and kind waits for it.
    @discardableResult
    package func resolve(deviceId: String, kind: RequestKind, _ response: Response) -> Resolution {
        let delivered = end(response.msgId) { pending in
            pending.deviceId == deviceId && pending.kind == kind ? .success(response) : nil
        }
        if delivered { return .delivered }
        return state.withLock { state in
            guard let index = state.unanswered.firstIndex(where: {
                $0.msgId == response.msgId && $0.deviceId == deviceId && $0.kind == kind
            }) else { return .unknown }
            // Forget it: a second copy of the same late answer is then just unknown, and logged at most once.
            state.unanswered[index] = Ended(msgId: "", deviceId: "", kind: kind)
            return .late
        }
    }

    /// Ends a request that could not be published.
    package func fail(_ msgId: String, _ error: RequestError) {
        end(msgId) { _ in .failure(error) }
    }

    /// Ends every request (the agent is stopping).
    package func cancelAll() {
        let ids = state.withLock { Array($0.pending.keys) }
        ids.forEach { id in end(id) { _ in .failure(.cancelled) } }
    }

    /// Gives `msgId` the outcome `decide` picks, unless it has one already or `decide` declines (nil).
    /// Returns whether the request took it. The waiter, if any, is resumed outside the lock.
    @discardableResult
    private func end(_ msgId: String, _ decide: (Pending) -> Outcome?) -> Bool {
        let (taken, resume): (Bool, (CheckedContinuation<Outcome, Never>, Outcome)?) = state.withLock { state in
            guard var pending = state.pending[msgId], pending.outcome == nil, let outcome = decide(pending) else {
                return (false, nil)
            }
            if case .failure(let error) = outcome, error == .cancelled || error.isTimeout {
                Self.remember(Ended(msgId: msgId, deviceId: pending.deviceId, kind: pending.kind), in: &state)
            }
            guard let continuation = pending.continuation else {
                pending.outcome = outcome
                state.pending[msgId] = pending
                return (true, nil)
            }
            Self.remove(msgId, from: &state)
            return (true, (continuation, outcome))
        }
        if let (continuation, outcome) = resume { continuation.resume(returning: outcome) }
        return taken
    }

    private static func remember(_ ended: Ended, in state: inout State) {
        if state.unanswered.count < rememberedUnanswered {
            state.unanswered.append(ended)
        } else {
            state.unanswered[state.nextSlot] = ended
            state.nextSlot = (state.nextSlot + 1) % rememberedUnanswered
        }
    }
}

/// Who the requests made in a task are for: the API sets it to the client a call comes from, so that the tracker
/// can bound each client's share of the requests in flight. Requests the agent makes on its own (links, rollouts
/// it tracks, the library's callers) have none.
package enum RequestOwner {
    @TaskLocal package static var current: String?
}

extension RequestError {
    package var isTimeout: Bool {
        if case .timeout = self { return true }
        return false
    }
}

extension Duration {
    package var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// Whole milliseconds, rounded down.
    package var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
