import Synchronization

/// The thing models in use, shared with the parts that check devices against them on their own (a replacement's
/// link moves, in the cache writer and the link engine); the agent's reload replaces them.
final package class CurrentModels: Sendable {
    private let models: Mutex<ThingModels>

    package init(_ models: ThingModels) {
        self.models = Mutex(models)
    }

    package func use(_ models: ThingModels) {
        self.models.withLock { $0 = models }
    }

    package func model(for productId: String?) -> ThingModel? {
        models.withLock { $0.model(for: productId) }
    }
}
