import Synchronization

/// The listener registries: per-device and fleet-wide, filtered by event kind.
///
/// Every listener has its own bounded queue. Publishing never waits: when a listener's queue is full the event is
/// dropped for that listener alone and counted, so a slow or failing listener never blocks ingest or the others.
///
/// `publish` hands events to the listeners' queues at once, on the publishing thread (a lock per queue, no task).
/// The receive path holds its events for the length of a network turn (`hold`, `release`): a turn reads every
/// packet waiting, so under load one hand-off carries a whole batch and wakes each listener once, instead of every
/// message waking a thread (which costs more than decoding it); when idle a turn is one message, handed on at once.
/// All hand-offs take one lock, so every listener sees the events in the order they were published.
public final class EventHub: Sendable {
    public static let defaultQueueLimit = 1024

    private struct Entry: Sendable {
        let device: String?
        let kinds: DeviceEventKinds
        let channel: EventChannel
    }

    private struct State: ~Copyable {
        var nextID: UInt64 = 0
        var fleet: [UInt64: Entry] = [:]
        var byDevice: [String: [UInt64: Entry]] = [:]
    }

    /// Events held while `holding`, and whether the hub has finished. Its lock also orders the hand-offs.
    private struct Pending: ~Copyable {
        var events: [DeviceEvent] = []
        var holding = false
        var finished = false
    }

    private let state = Mutex(State())
    private let pending = Mutex(Pending())
    private let droppedCount = Atomic<Int>(0)
    private let registered = Atomic<Int>(0)

    public init() {}

    /// Whether anyone listens; the receive path builds no events when nobody does.
    package var hasListeners: Bool { registered.load(ordering: .relaxed) > 0 }

    /// Events dropped because a listener's queue was full.
    public var dropped: Int { droppedCount.load(ordering: .relaxed) }

    /// How many listeners are registered (streams not yet finished).
    public var listenerCount: Int {
        state.withLock { $0.fleet.count + $0.byDevice.values.reduce(0) { $0 + $1.count } }
    }

    /// An ordered stream of the events for one device (or, with nil, the whole fleet).
    /// The registration ends when the stream is dropped or its consuming task is cancelled.
    public func events(device: String? = nil, kinds: DeviceEventKinds = .all,
                       queueLimit: Int = EventHub.defaultQueueLimit) -> DeviceEventStream {
        let channel = EventChannel(limit: queueLimit)
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            let entry = Entry(device: device, kinds: kinds, channel: channel)
            if let device {
                state.byDevice[device, default: [:]][state.nextID] = entry
            } else {
                state.fleet[state.nextID] = entry
            }
            return state.nextID
        }
        registered.add(1, ordering: .relaxed)
        if pending.withLock({ $0.finished }) { channel.finish() }
        return DeviceEventStream(registration: .init(channel: channel) { [weak self] in
            self?.remove(id, device: device)
        })
    }

    /// Calls `handler` for each matching event, in order, on a task of its own. Keep the token: releasing or
    /// cancelling it removes the listener.
    public func addListener(device: String? = nil, kinds: DeviceEventKinds = .all,
                            queueLimit: Int = EventHub.defaultQueueLimit,
                            _ handler: @escaping @Sendable (DeviceEvent) async -> Void) -> ListenerToken {
        let stream = events(device: device, kinds: kinds, queueLimit: queueLimit)
        return ListenerToken(Task {
            for await event in stream {
                await handler(event)
            }
        })
    }

    /// Hands events to the listeners' queues (held instead while the receive path holds). Never blocks on a
    /// listener; called on the receive path and wherever an event happens.
    package func publish(_ events: [DeviceEvent]) {
        guard !events.isEmpty else { return }
        pending.withLock { pending in
            guard !pending.finished else { return }
            if pending.holding {
                pending.events.append(contentsOf: events)
            } else {
                deliver(events)
            }
        }
    }

    /// Holds what is published until `release` (the receive path, for one network turn).
    package func hold() {
        pending.withLock { $0.holding = true }
    }

    /// Hands on everything held, in order, and stops holding.
    package func release() {
        pending.withLock { pending in
            pending.holding = false
            guard !pending.events.isEmpty else { return }
            if !pending.finished { deliver(pending.events) }
            pending.events.removeAll(keepingCapacity: true)
        }
    }

    /// Fans `events` out to the matching queues; under the `pending` lock, so that hand-offs never interleave.
    private func deliver(_ events: [DeviceEvent]) {
        let (fleet, byDevice) = state.withLock { ($0.fleet, $0.byDevice) }
        var dropped = 0
        for entry in fleet.values {
            dropped += entry.channel.send(events.lazy.filter { entry.kinds.contains($0.kind) })
        }
        if !byDevice.isEmpty {
            var perDevice: [String: [DeviceEvent]] = [:]
            for event in events where byDevice[event.deviceId] != nil {
                perDevice[event.deviceId, default: []].append(event)
            }
            for (device, list) in perDevice {
                for entry in byDevice[device]?.values ?? [:].values {
                    dropped += entry.channel.send(list.lazy.filter { entry.kinds.contains($0.kind) })
                }
            }
        }
        if dropped > 0 { droppedCount.add(dropped, ordering: .relaxed) }
    }

    /// Hands on what is held, then ends every stream (the agent is stopping).
    package func finishAll() {
        pending.withLock { pending in
            if !pending.events.isEmpty, !pending.finished { deliver(pending.events) }
            pending.events = []
            pending.holding = false
            pending.finished = true
        }
        let entries = state.withLock { state -> [Entry] in
            defer {
                state.fleet.removeAll()
                state.byDevice.removeAll()
            }
            return Array(state.fleet.values) + state.byDevice.values.flatMap(\.values)
        }
        registered.subtract(entries.count, ordering: .relaxed)
        entries.forEach { $0.channel.finish() }
    }

    private func remove(_ id: UInt64, device: String?) {
        let removed = state.withLock { state -> Bool in
            if let device {
                defer { if state.byDevice[device]?.isEmpty == true { state.byDevice[device] = nil } }
                return state.byDevice[device]?.removeValue(forKey: id) != nil
            }
            return state.fleet.removeValue(forKey: id) != nil
        }
        if removed { registered.subtract(1, ordering: .relaxed) }
    }
}

/// Keeps a listener registered. `cancel()` or releasing the token removes it.
public final class ListenerToken: Sendable, Hashable {
    private let task: Task<Void, Never>

    package init(_ task: Task<Void, Never>) {
        self.task = task
    }

    public func cancel() {
        task.cancel()
    }

    deinit {
        task.cancel()
    }

    public static func == (lhs: ListenerToken, rhs: ListenerToken) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
