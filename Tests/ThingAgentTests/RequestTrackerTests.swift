import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Request tracking on the pure tracker: each request ends exactly once, the first outcome wins, answers are
/// matched by msgId, device and kind, and a late answer is told apart from an unknown one.
@Suite("Request tracker")
struct RequestTrackerTests {
    let tracker = RequestTracker(limit: 3)

    func answer(_ msgId: String, code: Int = 0) -> Response {
        Response(msgId: msgId, code: code, message: nil, data: nil, time: 1)
    }

    @Test func answerBeforeTheWaitIsKept() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .delivered)
        #expect(await tracker.wait(for: id, timeout: .seconds(5)) == .success(answer(id)))
        #expect(tracker.inFlight == 0)
    }

    @Test func answerWhileWaitingEndsTheWait() async throws {
        let id = try tracker.register(deviceId: "d", kind: .getInfo)
        let tracker = tracker
        async let outcome = tracker.wait(for: id, timeout: .seconds(30))
        try await waitUntilWaiting(id)
        #expect(tracker.resolve(deviceId: "d", kind: .getInfo, answer(id, code: 1006)) == .delivered)
        #expect(await outcome == .success(answer(id, code: 1006)))
    }

    @Test func answerFromAnotherDeviceOrKindDoesNotMatch() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        #expect(tracker.resolve(deviceId: "other", kind: .setProperties, answer(id)) == .unknown)
        #expect(tracker.resolve(deviceId: "d", kind: .wifiScan, answer(id)) == .unknown)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer("t-unknown")) == .unknown)
        #expect(tracker.inFlight == 1)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .delivered)
    }

    @Test func firstOutcomeWinsAndARepeatIsUnknown() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id, code: 0)) == .delivered)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id, code: 1005)) == .unknown)
        tracker.fail(id, .notSent(reason: "late failure"))
        #expect(await tracker.wait(for: id, timeout: .seconds(5)) == .success(answer(id, code: 0)))
    }

    @Test func timeoutThenLateAnswerIsLateOnceThenUnknown() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        #expect(await tracker.wait(for: id, timeout: .milliseconds(20))
                == .failure(.timeout(deviceId: "d", request: "properties/set", seconds: 0.02)))
        #expect(tracker.inFlight == 0)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .late)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .unknown)
    }

    @Test func limitBoundsTheRequestsInFlight() throws {
        for _ in 1...3 { _ = try tracker.register(deviceId: "d", kind: .setProperties) }
        #expect(throws: RequestError.tooManyInFlight(limit: 3)) {
            try tracker.register(deviceId: "d", kind: .setProperties)
        }
        #expect(RequestError.tooManyInFlight(limit: 3).description.contains("limit 3"))
    }

    /// An owner (an API client) holds at most its share; the others, and requests with no owner, go on; an ended
    /// request gives its place back.
    @Test func anOwnerHoldsAtMostItsShare() async throws {
        let tracker = RequestTracker(limit: 4, ownerLimit: 2)
        let first = try RequestOwner.$current.withValue("greedy") {
            let first = try tracker.register(deviceId: "d", kind: .setProperties)
            _ = try tracker.register(deviceId: "d", kind: .setProperties)
            #expect(throws: RequestError.tooManyInFlight(limit: 2)) {
                try tracker.register(deviceId: "d", kind: .setProperties)
            }
            return first
        }
        #expect(tracker.inFlight(owner: "greedy") == 2)
        _ = try RequestOwner.$current.withValue("other") { try tracker.register(deviceId: "d", kind: .setProperties) }
        _ = try tracker.register(deviceId: "d", kind: .setProperties)
        #expect(throws: RequestError.tooManyInFlight(limit: 4)) { try tracker.register(deviceId: "d", kind: .setProperties) }
        tracker.fail(first, .notSent(reason: "gone"))
        _ = await tracker.wait(for: first, timeout: .seconds(5))
        #expect(tracker.inFlight(owner: "greedy") == 1)
        #expect(tracker.inFlight == 3)
    }

    @Test func msgIdsAreUniqueAndWithinTheProtocolLength() throws {
        let tracker = RequestTracker(limit: 10_000)
        let ids = try (1...10_000).map { _ in try tracker.register(deviceId: "d", kind: .setProperties) }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { (1...32).contains($0.utf8.count) })
    }

    @Test func notSentEndsTheRequest() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        tracker.fail(id, .notSent(reason: "connection lost"))
        #expect(await tracker.wait(for: id, timeout: .seconds(5)) == .failure(.notSent(reason: "connection lost")))
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .unknown)
    }

    @Test func cancellingTheWaiterEndsTheRequestAsCancelled() async throws {
        let id = try tracker.register(deviceId: "d", kind: .setProperties)
        let tracker = tracker
        let waiting = Task { await tracker.wait(for: id, timeout: .seconds(30)) }
        try await waitUntilWaiting(id)
        waiting.cancel()
        #expect(await waiting.value == .failure(.cancelled))
        #expect(tracker.inFlight == 0)
        #expect(tracker.resolve(deviceId: "d", kind: .setProperties, answer(id)) == .late)
    }

    @Test func cancelAllEndsEveryRequest() async throws {
        let tracker = tracker
        let ids = try (1...3).map { _ in try tracker.register(deviceId: "d", kind: .getInfo) }
        let waits = ids.map { id in Task { await tracker.wait(for: id, timeout: .seconds(30)) } }
        tracker.cancelAll()
        for wait in waits { #expect(await wait.value == .failure(.cancelled)) }
        #expect(tracker.inFlight == 0)
    }

    @Test func oldUnansweredRequestsAreForgottenBeyondTheBound() async throws {
        let tracker = RequestTracker(limit: 10_000)
        let count = RequestTracker.rememberedUnanswered + 1
        let ids = try (0..<count).map { _ in try tracker.register(deviceId: "d", kind: .getInfo) }
        tracker.cancelAll()
        let late = ids.filter { tracker.resolve(deviceId: "d", kind: .getInfo, answer($0)) == .late }
        #expect(late.count == RequestTracker.rememberedUnanswered)
    }

    /// Waits until `wait` has parked for `id`, so that what follows goes straight to the waiter.
    func waitUntilWaiting(_ id: String) async throws {
        let tracker = tracker
        try await waitUntil { tracker.isWaiting(id) }
    }
}
