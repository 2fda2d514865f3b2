import Synchronization

/// Listener objects registered by identity and held weakly, as the device SDKs do:
/// a listener that is released stops hearing events and its registration goes away.
final package class WeakListeners: Sendable {
    package init() {}

    /// Each registration with a number of its own, so that a task that ends removes its own registration and
    /// never the one that replaced it (the same listener added again, or a new one at a released one's address).
    private struct Registration: Sendable {
        let number: UInt64
        let token: ListenerToken
    }

    private struct State: ~Copyable {
        var next: UInt64 = 0
        var registrations: [ObjectIdentifier: Registration] = [:]
    }

    private let state = Mutex(State())

    /// Registers `listener` for `device`'s events of `kinds`; `deliver` turns an event into the listener's callback.
    /// Adding a listener that is already registered replaces its registration: it hears each event once.
    package func add<Listener: AnyObject & Sendable>(_ listener: Listener, hub: EventHub, device: String?, kinds: DeviceEventKinds,
             deliver: @escaping @Sendable (Listener, DeviceEvent) -> Void) {
        let key = ObjectIdentifier(listener)
        let number = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        let stream = hub.events(device: device, kinds: kinds)
        let token = ListenerToken(Task { [weak listener, weak self] in
            for await event in stream {
                guard let listener else { break }
                deliver(listener, event)
            }
            self?.removeIfCurrent(key, number: number)
        })
        let replaced = state.withLock { $0.registrations.updateValue(Registration(number: number, token: token), forKey: key) }
        replaced?.token.cancel()
    }

    package func remove(_ listener: AnyObject) {
        state.withLock { $0.registrations.removeValue(forKey: ObjectIdentifier(listener)) }?.token.cancel()
    }

    package var count: Int { state.withLock { $0.registrations.count } }

    private func removeIfCurrent(_ key: ObjectIdentifier, number: UInt64) {
        state.withLock { state in
            if state.registrations[key]?.number == number { state.registrations[key] = nil }
        }
    }
}
