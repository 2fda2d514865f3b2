import MQTT
import Synchronization
import ThingAgentCore

/// The answers the dialects owe devices (an Alink post's reply, an NTP response), from the receive path to the
/// broker: queued there, never waited for on the network thread, and published by the daemon's part "dialect
/// replies". Beyond `limit` waiting, one is dropped and counted: a device that misses a reply sends again.
final class ReplyQueue: Sendable {
    static let limit = 4096
    private let stream: AsyncStream<OutboundMessage>
    private let continuation: AsyncStream<OutboundMessage>.Continuation
    let dropped = Atomic<Int>(0)

    init() {
        (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.limit))
    }

    func enqueue(_ message: OutboundMessage) {
        if case .dropped = continuation.yield(message) { dropped.add(1, ordering: .relaxed) }
    }

    /// Publishes until the task is cancelled or the queue finishes; one that cannot go out (not connected) is lost,
    /// as a reply to a device that is away would be.
    func run(_ client: MQTTClient) async {
        await withTaskCancellationHandler {
            for await message in stream {
                try? await client.publish(message.topic, payload: message.payload,
                                          qos: QoS(rawValue: message.qos) ?? .atMostOnce)
            }
        } onCancel: {
            continuation.finish()
        }
    }
}
