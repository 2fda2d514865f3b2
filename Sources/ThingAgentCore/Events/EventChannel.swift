import Synchronization

/// One listener's bounded queue. The hub hands it whole batches (one lock, at most one wake-up per batch);
/// the listener takes everything queued at once. When full, new events are dropped for this listener alone.
///
/// Hand-written rather than `AsyncStream` because the stream's per-element hand-off (a continuation per element,
/// an O(n) removal from the front of its buffer) cost more than decoding the message that caused the event.
final package class EventChannel: Sendable {
    private struct State: ~Copyable {
        var buffer: [DeviceEvent] = []
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
    }

    package let limit: Int
    private let state = Mutex(State())

    package init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Queues what fits; returns how many events were dropped.
    package func send(_ events: some Collection<DeviceEvent>) -> Int {
        guard !events.isEmpty else { return 0 }
        let (waiter, dropped) = state.withLock { state -> (CheckedContinuation<Void, Never>?, Int) in
            guard !state.finished else { return (nil, 0) }
            let room = max(0, limit - state.buffer.count)
            state.buffer.append(contentsOf: events.prefix(room))
            defer { state.waiter = nil }
            return (state.waiter, events.count - min(room, events.count))
        }
        waiter?.resume()
        return dropped
    }

    /// Empties the queue; returns how many events it held.
    package func discard() -> Int {
        state.withLock { state in
            defer { state.buffer = [] }
            return state.buffer.count
        }
    }

    package func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// What is queued, up to `limit` events (the rest stays queued, within the channel's bound), waiting while there
    /// is nothing; nil once finished (or the task is cancelled) and drained.
    package func take(atMost limit: Int = .max) async -> [DeviceEvent]? {
        while true {
            let (batch, finished) = state.withLock { state -> ([DeviceEvent], Bool) in
                guard state.buffer.count > limit else {
                    defer { state.buffer = [] }
                    return (state.buffer, state.finished)
                }
                defer { state.buffer.removeFirst(limit) }
                return (Array(state.buffer.prefix(limit)), state.finished)
            }
            if !batch.isEmpty { return batch }
            if finished || Task.isCancelled { return nil }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                    let resumeNow = state.withLock { state -> Bool in
                        // Cancelled before the waiter was set: `onCancel` found none to resume, so do not wait.
                        if state.finished || !state.buffer.isEmpty || Task.isCancelled { return true }
                        state.waiter = waiter
                        return false
                    }
                    if resumeNow { waiter.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }
}

/// The events of one registration, in order, as an AsyncSequence. The registration ends when the sequence and its
/// iterator are released, or when the consuming task is cancelled.
public struct DeviceEventStream: AsyncSequence, Sendable {
    public typealias Element = DeviceEvent

    final package class Registration: Sendable {
        let channel: EventChannel
        let onEnd: @Sendable () -> Void

        init(channel: EventChannel, onEnd: @escaping @Sendable () -> Void) {
            self.channel = channel
            self.onEnd = onEnd
        }

        deinit {
            channel.finish()
            onEnd()
        }
    }

    package let registration: Registration

    /// Everything queued at once (waiting while nothing is), for a consumer that handles events in batches; nil
    /// once the stream ended. Not to be mixed with iterating the same stream.
    package func nextBatch(atMost limit: Int = .max) async -> [DeviceEvent]? {
        await registration.channel.take(atMost: limit)
    }

    /// Empties the queue without handing the events on; returns how many it held.
    package func discardQueued() -> Int {
        registration.channel.discard()
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let registration: Registration
        var batch: [DeviceEvent] = []
        var index = 0

        /// Nil once the consuming task is cancelled, even with events queued: a listener removed (its token
        /// cancelled) hears nothing after the removal, though the hub may already have queued more for it.
        public mutating func next() async -> DeviceEvent? {
            if index >= batch.count {
                guard let next = await registration.channel.take() else { return nil }
                batch = next
                index = 0
            }
            if Task.isCancelled { return nil }
            defer { index += 1 }
            return batch[index]
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(registration: registration)
    }
}
