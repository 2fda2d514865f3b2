import Synchronization
import TestSupport
@testable import ThingAgent

extension Agent {
    /// Runs the agent in a task, returned once the broker acknowledged its subscriptions: "connected" alone is not
    /// enough, a report published before the SUBACK would not reach it.
    func runUntilSubscribed() async throws -> Task<Void, any Error> {
        let subscribed = SubscribedFlag()
        let running = Task { try await run(onStarted: { subscribed.set() }) }
        try await waitUntil(timeout: .seconds(30)) { subscribed.isSet }
        return running
    }

    /// Runs the agent until it is subscribed, then `body`; stops it afterwards, also when `body` throws.
    @discardableResult
    func whileRunning<T: Sendable>(_ body: (Agent) async throws -> T) async throws -> T {
        let running = try await runUntilSubscribed()
        let result: T
        do {
            result = try await body(self)
        } catch {
            running.cancel()
            _ = try? await running.value
            throw error
        }
        running.cancel()
        _ = try? await running.value
        return result
    }
}

private final class SubscribedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
