import Synchronization

/// The thing models in use, shared with the parts that check devices against them on their own (a replacement's
/// link moves, in the cache writer and the link engine); the agent's reload replaces them.
final class CurrentModels: Sendable {
    private let models: Mutex<ThingModels>

    init(_ models: ThingModels) {
        self.models = Mutex(models)
    }

    func use(_ models: ThingModels) {
        self.models.withLock { $0 = models }
    }

    func model(for productId: String?) -> ThingModel? {
        models.withLock { $0.model(for: productId) }
    }
}
