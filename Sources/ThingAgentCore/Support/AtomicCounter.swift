import Synchronization

/// One lock-free counter, as a class so that several can sit in an array.
final package class AtomicCounter: Sendable {
    private let storage = Atomic<Int>(0)
    package func add(_ n: Int = 1) { storage.add(n, ordering: .relaxed) }
    package func store(_ n: Int) { storage.store(n, ordering: .relaxed) }
    package var value: Int { storage.load(ordering: .relaxed) }
}
