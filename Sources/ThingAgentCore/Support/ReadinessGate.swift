import Synchronization

/// Whether the agent is connected and subscribed, and those waiting for it to be: opened once the first
/// subscriptions are acknowledged and whenever the connection comes back after that, closed while it is away.
/// `open` and `close` come from the MQTT network thread, so nothing here blocks or suspends.
final package class ReadinessGate: Sendable {
    package init() {}

    /// A wait from its start to its end: its continuation once it parked, or that it was given up before.
    private enum Waiter {
        case starting
        case parked(CheckedContinuation<Bool, Never>)
        case givenUp
    }

    private struct State {
        var subscribed = false
        var connected = false
        var open: Bool { subscribed && connected }
        var nextWaiter = 0
        var waiters: [Int: Waiter] = [:]
    }

    private let state = Mutex(State())

    package var isOpen: Bool { state.withLock { $0.open } }

    /// The first subscriptions were acknowledged (the connection is up then, or the gate would not matter yet).
    package func subscribed() {
        update { $0.subscribed = true }
    }

    /// The MQTT client's state changed: connected or not.
    package func connection(up: Bool) {
        update { $0.connected = up }
    }

    private func update(_ change: (inout State) -> Void) {
        let woken: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            change(&state)
            guard state.open else { return [] }
            var parked: [CheckedContinuation<Bool, Never>] = []
            for (id, waiter) in state.waiters {
                guard case .parked(let continuation) = waiter else { continue }
                parked.append(continuation)
                state.waiters[id] = nil
            }
            return parked
        }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// True once open (at once when it is), false when `timeout` passed first or the calling task was cancelled.
    package func wait(timeout: Duration) async -> Bool {
        let id: Int? = state.withLock { state in
            guard !state.open else { return nil }
            defer { state.nextWaiter += 1 }
            state.waiters[state.nextWaiter] = .starting
            return state.nextWaiter
        }
        guard let id else { return true }
        return await withTimeout(timeout, {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now: Bool? = self.state.withLock { state in
                        if case .givenUp = state.waiters[id] {
                            state.waiters[id] = nil
                            return false
                        }
                        if state.open {
                            state.waiters[id] = nil
                            return true
                        }
                        state.waiters[id] = .parked(continuation)
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                self.giveUp(id)
            }
        }, expire: { self.giveUp(id) })
    }

    /// Ends one wait with false if it still waits; one not parked yet ends as soon as it would park.
    private func giveUp(_ id: Int) {
        let parked: CheckedContinuation<Bool, Never>? = state.withLock { state in
            switch state.waiters[id] {
            case .parked(let continuation):
                state.waiters[id] = nil
                return continuation
            case .starting:
                state.waiters[id] = .givenUp
                return nil
            case .givenUp, nil:
                return nil
            }
        }
        parked?.resume(returning: false)
    }
}
