internal import CLazyLibraries

extension MQTTClient {
    /// Publishes `messages` at once, in their order, without waiting for one acknowledgement before the next goes
    /// out, and returns each one's outcome (in the same order) once all are settled: for QoS 1/2 the broker's
    /// acknowledgement, for QoS 0 the hand-over to the library. MQTT keeps one connection's messages in order, so
    /// the broker gets them as given (after a connection loss the library may send an unacknowledged one again, as
    /// with `publish`). A message that cannot be sent fails alone (`.notConnected` when not connected).
    /// A cancelled caller stops waiting (the unsettled messages end as `.notConnected`); what was sent stays sent.
    public func publish(inOrder messages: [(topic: String, payload: [UInt8])], qos: QoS, retain: Bool = false)
        async -> [Result<Void, MQTTError>]
    {
        guard !messages.isEmpty else { return [] }
        let batch = PublishBatch(count: messages.count)
        let core = core
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: PublishBatch.Waiter) in
                core.withState { state in
                    // Set before the first send: the last settled message resumes it, possibly within this lock.
                    batch.waiter = waiter
                    send(messages, qos: qos, retain: retain, as: batch, &state)
                }
            }
        } onCancel: {
            core.withState { state in
                batch.cancelled = true
                for mid in batch.mids {
                    // A message id is reused once its operation ended: only this batch's own entries are taken.
                    guard let operation = state.pending[mid], case .batchPublish(let owner, _, let topic) = operation,
                          owner === batch
                    else { continue }
                    state.pending.removeValue(forKey: mid)
                    state.settle(operation, .failure(cancelled(topic)))
                }
            }
        }
    }

    /// Queues each message with the library (under the client's lock, as `publish` does, so the network thread
    /// cannot destroy the handle meanwhile) and registers the acknowledged ones under their message ids.
    private func send(_ messages: [(topic: String, payload: [UInt8])], qos: QoS, retain: Bool, as batch: PublishBatch,
                      _ state: inout State) {
        let handle = connectedHandle(state, context: "")
        for (index, message) in messages.enumerated() {
            let operation = PendingOperation.batchPublish(batch, index: index, topic: message.topic)
            let context = "publish to \"\(message.topic)\""
            guard let handle else {
                state.settle(operation, .failure(notConnectedError(state, context: context)))
                continue
            }
            var mid: Int32 = 0
            let rc = message.payload.withUnsafeBytes { bytes in
                libmosquitto.mosquitto_publish(handle.pointer, &mid, message.topic, Int32(bytes.count), bytes.baseAddress,
                                  Int32(qos.rawValue), retain)
            }
            if rc != 0 {
                state.settle(operation, .failure(.library(rc, context: context)))
            } else if qos == .atMostOnce {
                state.settle(operation, .success(()))
            } else if batch.cancelled {
                state.settle(operation, .failure(cancelled(message.topic)))
            } else {
                state.pending[mid] = operation
                batch.mids.append(mid)
            }
        }
        core.wake.signal()
    }

    private func cancelled(_ topic: String) -> MQTTError {
        Self.cancelledError("publish to \"\(topic)\"")
    }
}

/// The messages of one `publish(inOrder:)`: each settles its own slot; the last one settled resumes the caller with
/// them all. Read and written only under the client's lock.
final class PublishBatch: @unchecked Sendable {
    typealias Waiter = CheckedContinuation<[Result<Void, MQTTError>], Never>

    private var outcomes: [Result<Void, MQTTError>?]
    private var unsettled: Int
    var waiter: Waiter?
    /// The message ids registered, to find them again when the caller is cancelled.
    var mids: [Int32] = []
    var cancelled = false

    init(count: Int) {
        outcomes = Array(repeating: nil, count: count)
        unsettled = count
    }

    /// Records the outcome of slot `index` (once); when every slot is settled, the waiter to resume and the outcomes.
    func settle(_ index: Int, _ outcome: Result<Void, MQTTError>) -> (Waiter, [Result<Void, MQTTError>])? {
        guard outcomes[index] == nil else { return nil }
        outcomes[index] = outcome
        unsettled -= 1
        guard unsettled == 0, let waiter else { return nil }
        self.waiter = nil
        return (waiter, outcomes.compactMap { $0 })
    }
}
