import Synchronization

/// The listener registries: per-device and fleet-wide, filtered by event kind.
///
/// Every listener has its own bounded queue. Publishing never waits: when a listener's queue is full the event is
/// dropped for that listener alone and counted, so a slow or failing listener never blocks ingest or the others.
///
/// The receive path only appends to one pending list; a dispatcher task fans the list out to the listeners. It
/// gathers for `coalescing` after a wake-up, so under load one wake-up carries many events instead of every
/// message waking a thread (which costs more than decoding it); when idle it sleeps without a timer.
public final class EventHub: Sendable {
    public static let defaultQueueLimit = 1024
    /// How long the dispatcher lets a burst gather; the latency it adds to an event at most.
    public static let coalescing: Duration = .microseconds(500)

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

    private struct Pending: ~Copyable {
        var events: [DeviceEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var dispatcher: Task<Void, Never>?
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
        startDispatcher()
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

    /// Queues events for the listeners. Never blocks; called on the receive path.
    package func publish(_ events: [DeviceEvent]) {
        guard !events.isEmpty else { return }
        let waiter = pending.withLock { pending -> CheckedContinuation<Void, Never>? in
            guard !pending.finished else { return nil }
            pending.events.append(contentsOf: events)
            defer { pending.waiter = nil }
            return pending.waiter
        }
        waiter?.resume()
    }

    private func startDispatcher() {
        pending.withLock { pending in
            guard pending.dispatcher == nil, !pending.finished else { return }
            pending.dispatcher = Task { [weak self] in await self?.dispatch() }
        }
    }

    /// The dispatcher: wait for events, let a burst gather, fan the batch out, repeat.
    private func dispatch() async {
        while true {
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let resumeNow = pending.withLock { pending -> Bool in
                    if pending.finished || !pending.events.isEmpty { return true }
                    pending.waiter = waiter
                    return false
                }
                if resumeNow { waiter.resume() }
            }
            guard !pending.withLock({ $0.finished }) else { return }
            try? await Task.sleep(for: Self.coalescing)
            let batch = pending.withLock { pending -> [DeviceEvent] in
                defer { pending.events.removeAll(keepingCapacity: true) }
                return pending.events
            }
            deliver(batch)
        }
    }

    private func deliver(_ events: [DeviceEvent]) {
        guard !events.isEmpty else { return }
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

    /// Delivers what is pending, then ends every stream (the agent is stopping).
    package func finishAll() {
        let (batch, waiter, dispatcher) = pending.withLock { pending in
            pending.finished = true
            defer {
                pending.events = []
                pending.waiter = nil
                pending.dispatcher = nil
            }
            return (pending.events, pending.waiter, pending.dispatcher)
        }
        deliver(batch)
        waiter?.resume()
        dispatcher?.cancel()
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
