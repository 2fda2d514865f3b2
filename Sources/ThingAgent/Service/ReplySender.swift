import MQTT
import Synchronization
import ThingAgentCore

/// Sends the answers the dialects owe devices (an Alink post's reply, an NTP response) from the receive path: on
/// the network thread itself, at QoS 0, written with the acknowledgements of the messages just read
/// (`MQTTClient.publishFromHandler`). A queue and a task of its own cost a thread hand-off per reply, which held an
/// Alink backlog's drain to a third of the raw client's. A reply that cannot go out (not connected) is lost, as one
/// to a device that is away would be: the device sends its message again.
final class ReplySender: Sendable {
    /// The daemon's client, set once it exists (weakly: the client's handler holds the ingestor, which holds this).
    private struct Target {
        weak var client: MQTTClient?
    }

    private let target = Mutex(Target())

    func use(_ client: MQTTClient) {
        target.withLock { $0.client = client }
    }

    func send(_ message: OutboundMessage) {
        guard let client = target.withLock({ $0.client }) else { return }
        try? client.publishFromHandler(message.topic, payload: message.payload)
    }
}
