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
}

private final class SubscribedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
