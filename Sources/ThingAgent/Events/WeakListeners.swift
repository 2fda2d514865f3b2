import Synchronization

/// Listener objects registered by identity and held weakly, as the device SDKs do:
/// a listener that is released stops hearing events and its registration goes away.
final class WeakListeners: Sendable {
    private let tokens = Mutex<[ObjectIdentifier: ListenerToken]>([:])

    /// Registers `listener` for `device`'s events of `kinds`; `deliver` turns an event into the listener's callback.
    func add<Listener: AnyObject & Sendable>(_ listener: Listener, hub: EventHub, device: String?, kinds: DeviceEventKinds,
             deliver: @escaping @Sendable (Listener, DeviceEvent) -> Void) {
        let key = ObjectIdentifier(listener)
        let stream = hub.events(device: device, kinds: kinds)
        let token = ListenerToken(Task { [weak listener, weak self] in
            for await event in stream {
                guard let listener else { break }
                deliver(listener, event)
            }
            _ = self?.tokens.withLock { $0.removeValue(forKey: key) }
        })
        let replaced = tokens.withLock { $0.updateValue(token, forKey: key) }
        replaced?.cancel()
    }

    func remove(_ listener: AnyObject) {
        tokens.withLock { $0.removeValue(forKey: ObjectIdentifier(listener)) }?.cancel()
    }

    var count: Int { tokens.withLock { $0.count } }
}
