import Synchronization

/// Matches answers to requests by `msgId` and ends each request exactly once: answer, refusal, timeout or cancel.
///
/// An answer may arrive before the publish is even acknowledged, so a request is registered before it is sent and
/// an early answer is kept until the sender starts waiting.
final class RequestTracker: Sendable {
    let limit: Int

    private struct Pending {
        let deviceId: String
        let kind: RequestKind
        var answer: Response?
        var failure: RequestError?
        var continuation: CheckedContinuation<Response, any Error>?
    }

    private struct State: ~Copyable {
        var pending: [String: Pending] = [:]
        var counter: UInt64
    }

    private let state: Mutex<State>

    init(limit: Int) {
        self.limit = max(1, limit)
        // A random start keeps ids unique across restarts, so a late answer to an old request never matches a new one.
        state = Mutex(State(counter: UInt64.random(in: 1...(UInt64(1) << 40))))
    }

    var inFlight: Int { state.withLock { $0.pending.count } }

    /// Registers a request and returns its `msgId`.
    func register(deviceId: String, kind: RequestKind) throws(RequestError) -> String {
        let id: String? = state.withLock { state in
            guard state.pending.count < limit else { return nil }
            state.counter &+= 1
            let id = "t" + String(state.counter, radix: 36)
            state.pending[id] = Pending(deviceId: deviceId, kind: kind)
            return id
        }
        guard let id else { throw .tooManyInFlight(limit: limit) }
        return id
    }

    /// Waits for the answer to `msgId`; a timeout or cancellation ends it.
    func wait(for msgId: String, timeout: Duration) async throws(RequestError) -> Response {
        let timer = Task { [weak self] in
            try await Task.sleep(for: timeout)
            guard let self, let pending = self.state.withLock({ $0.pending[msgId] }) else { return }
            self.finish(msgId, with: .failure(.timeout(
                deviceId: pending.deviceId, request: pending.kind.rawValue, seconds: timeout.seconds)))
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let early: Result<Response, RequestError>? = state.withLock { state in
                        guard var pending = state.pending[msgId] else { return .failure(.cancelled) }
                        if let answer = pending.answer {
                            state.pending[msgId] = nil
                            return .success(answer)
                        }
                        if let failure = pending.failure {
                            state.pending[msgId] = nil
                            return .failure(failure)
                        }
                        pending.continuation = continuation
                        state.pending[msgId] = pending
                        return nil
                    }
                    if let early { continuation.resume(with: early.mapError { $0 as any Error }) }
                }
            } onCancel: {
                finish(msgId, with: .failure(.cancelled))
            }
        } catch let error as RequestError {
            throw error
        } catch {
            throw .cancelled
        }
    }

    /// Hands an answer to its request. False when no request waits for this `msgId` from this device
    /// (unknown, or already ended by a timeout): the caller logs and drops it.
    @discardableResult
    func resolve(deviceId: String, kind: RequestKind, _ response: Response) -> Bool {
        let matches = state.withLock { state in
            state.pending[response.msgId].map { $0.deviceId == deviceId && $0.kind == kind } ?? false
        }
        guard matches else { return false }
        finish(response.msgId, with: .success(response))
        return true
    }

    /// Ends a request that could not be sent.
    func cancel(_ msgId: String) {
        _ = state.withLock { $0.pending.removeValue(forKey: msgId) }
    }

    /// Ends every request (the agent is stopping).
    func cancelAll() {
        let ids = state.withLock { Array($0.pending.keys) }
        ids.forEach { finish($0, with: .failure(.cancelled)) }
    }

    private func finish(_ msgId: String, with result: Result<Response, RequestError>) {
        let continuation: CheckedContinuation<Response, any Error>? = state.withLock { state in
            guard var pending = state.pending[msgId] else { return nil }
            guard let continuation = pending.continuation else {
                // Not waiting yet: keep the outcome for `wait`.
                switch result {
                case .success(let answer): pending.answer = answer
                case .failure(let error): pending.failure = error
                }
                state.pending[msgId] = pending
                return nil
            }
            state.pending[msgId] = nil
            return continuation
        }
        continuation?.resume(with: result.mapError { $0 as any Error })
    }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
