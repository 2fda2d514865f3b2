import Synchronization

/// The listener registries: per-device and fleet-wide, filtered by event kind.
///
/// Every listener has its own bounded queue. Publishing never waits: when a listener's queue is full the event is
/// dropped for that listener alone and counted, so a slow or failing listener never blocks ingest or the others.
public final class EventHub: Sendable {
    public static let defaultQueueLimit = 1024

    private struct Entry: Sendable {
        let device: String?
        let kinds: DeviceEventKinds
        let continuation: AsyncStream<DeviceEvent>.Continuation
    }

    private struct State: ~Copyable {
        var nextID: UInt64 = 0
        var fleet: [UInt64: Entry] = [:]
        var byDevice: [String: [UInt64: Entry]] = [:]
    }

    private let state = Mutex(State())
    private let droppedCount = Atomic<Int>(0)

    public init() {}

    /// Events dropped because a listener's queue was full.
    public var dropped: Int { droppedCount.load(ordering: .relaxed) }

    /// How many listeners are registered (streams not yet finished).
    public var listenerCount: Int {
        state.withLock { $0.fleet.count + $0.byDevice.values.reduce(0) { $0 + $1.count } }
    }

    /// An ordered stream of the events for one device (or, with nil, the whole fleet).
    /// The registration ends when the stream is dropped or its consuming task is cancelled.
    public func events(device: String? = nil, kinds: DeviceEventKinds = .all,
                       queueLimit: Int = EventHub.defaultQueueLimit) -> AsyncStream<DeviceEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DeviceEvent.self, bufferingPolicy: .bufferingOldest(max(1, queueLimit)))
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            let entry = Entry(device: device, kinds: kinds, continuation: continuation)
            if let device {
                state.byDevice[device, default: [:]][state.nextID] = entry
            } else {
                state.fleet[state.nextID] = entry
            }
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id, device: device) }
        return stream
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

    /// Sends events to the matching listeners. Never blocks; called on the ingest path.
    func publish(_ events: [DeviceEvent]) {
        guard !events.isEmpty else { return }
        let targets = state.withLock { state -> [Entry] in
            var targets = Array(state.fleet.values)
            if let device = events.first?.deviceId, let entries = state.byDevice[device] {
                targets.append(contentsOf: entries.values)
            }
            return targets
        }
        for event in events {
            for entry in targets where entry.kinds.contains(event.kind) {
                if entry.device != nil && entry.device != event.deviceId { continue }
                if case .dropped = entry.continuation.yield(event) {
                    droppedCount.add(1, ordering: .relaxed)
                }
            }
        }
    }

    /// Ends every stream (the agent is stopping).
    func finishAll() {
        let entries = state.withLock { state -> [Entry] in
            defer {
                state.fleet.removeAll()
                state.byDevice.removeAll()
            }
            return Array(state.fleet.values) + state.byDevice.values.flatMap(\.values)
        }
        entries.forEach { $0.continuation.finish() }
    }

    private func remove(_ id: UInt64, device: String?) {
        state.withLock { state in
            if let device {
                state.byDevice[device]?[id] = nil
                if state.byDevice[device]?.isEmpty == true { state.byDevice[device] = nil }
            } else {
                state.fleet[id] = nil
            }
        }
    }
}

/// Keeps a listener registered. `cancel()` or releasing the token removes it.
public final class ListenerToken: Sendable, Hashable {
    private let task: Task<Void, Never>

    init(_ task: Task<Void, Never>) {
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
