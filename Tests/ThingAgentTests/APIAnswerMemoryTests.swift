import Testing
@testable import ThingAgent

/// The API's memory of requests by client and id, on its own: one run per key, answers kept for the window and
/// the capacity, a released claim runs again.
@Suite("API answer memory")
struct APIAnswerMemoryTests {
    let start = ContinuousClock.now

    @Test func aKeyIsRunOnceThenAnsweredFromMemory() {
        let memory = APIAnswerMemory()
        #expect(memory.claim("a", now: start) == .run)
        #expect(memory.claim("a", now: start) == .running)
        memory.remember("a", answer: [1, 2])
        #expect(memory.claim("a", now: start) == .answered([1, 2]))
        #expect(memory.claim("b", now: start) == .run, "another key is its own request")
    }

    @Test func aReleasedClaimRunsAgain() {
        let memory = APIAnswerMemory()
        #expect(memory.claim("a", now: start) == .run)
        memory.release("a")
        #expect(memory.claim("a", now: start) == .run)
    }

    @Test func entriesAreForgottenAfterTheWindowAndBeyondTheCapacity() {
        let memory = APIAnswerMemory(window: .seconds(10), capacity: 3)
        for key in ["a", "b", "c"] { #expect(memory.claim(key, now: start) == .run) }
        #expect(memory.claim("d", now: start) == .run)
        #expect(memory.count == 3, "the oldest went to make room")
        #expect(memory.claim("a", now: start) == .run, "forgotten: run again")
        #expect(memory.claim("d", now: start + .seconds(11)) == .run, "past the window: run again")
        #expect(memory.count <= 3)
    }

    @Test func theKeyIsTheClientAndTheId() {
        #expect(APIAnswerMemory.key(client: "a", id: "1") != APIAnswerMemory.key(client: "a1", id: ""))
    }
}
