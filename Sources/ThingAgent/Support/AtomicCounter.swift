import Synchronization

/// One lock-free counter, as a class so that several can sit in an array.
final class AtomicCounter: Sendable {
    private let storage = Atomic<Int>(0)
    func add(_ n: Int = 1) { storage.add(n, ordering: .relaxed) }
    func store(_ n: Int) { storage.store(n, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}
