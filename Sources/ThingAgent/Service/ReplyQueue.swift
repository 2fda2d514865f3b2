import MQTT
import Synchronization
import ThingAgentCore

/// The answers the dialects owe devices (an Alink post's reply, an NTP response), from the receive path to the
/// broker: queued there, never waited for on the network thread, and published by the daemon's part "dialect
/// replies" in batches, as the event feed is (one hold of the client's lock and one wake-up of its network
/// thread per batch: one at a time, each reply cost a thread hand-off and the drain of an Alink backlog fell to a
/// few hundred posts a second). Beyond `limit` waiting, one is dropped and counted: a device that misses a reply
/// sends again.
final class ReplyQueue: Sendable {
    static let limit = 4096
    static let batchLimit = 128

    private struct State: ~Copyable {
        var queued: [OutboundMessage] = []
        var waiter: CheckedContinuation<Void, Never>?
        var finished = false
    }

    private let state = Mutex(State())
    let dropped = Atomic<Int>(0)

    func enqueue(_ message: OutboundMessage) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.finished else { return nil }
            guard state.queued.count < Self.limit else {
                dropped.add(1, ordering: .relaxed)
                return nil
            }
            state.queued.append(message)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Publishes until the task is cancelled; what cannot go out (not connected) is lost, as a reply to a device
    /// that is away would be.
    func run(_ client: MQTTClient) async {
        while let batch = await next() {
            for qos in [0, 1, 2] {
                let messages = batch.filter { $0.qos == qos }.map { (topic: $0.topic, payload: $0.payload) }
                if !messages.isEmpty { _ = await client.publish(inOrder: messages, qos: QoS(rawValue: qos)!) }
            }
        }
    }

    /// Up to `batchLimit` queued replies, waiting while there are none; nil once cancelled.
    private func next() async -> [OutboundMessage]? {
        while true {
            let batch = state.withLock { state -> [OutboundMessage] in
                let count = min(state.queued.count, Self.batchLimit)
                defer { state.queued.removeFirst(count) }
                return Array(state.queued.prefix(count))
            }
            if !batch.isEmpty { return batch }
            if Task.isCancelled { return nil }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { state -> Bool in
                        if !state.queued.isEmpty || Task.isCancelled { return true }
                        state.waiter = waiter
                        return false
                    }
                    if now { waiter.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    state.finished = true
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }
    }
}
