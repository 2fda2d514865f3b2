import MQTT
import Synchronization
import ThingAgentCore

/// Sends the answers the dialects owe devices (an Alink post's reply, an NTP response) from the receive path: on
/// the network thread itself, at QoS 0, written with the acknowledgements of the messages just read
/// (`MQTTClient.publishFromHandler`). A queue and a task of its own cost a thread hand-off per reply, which held an
/// Alink backlog's drain to a third of the raw client's. A reply that cannot go out (not connected) is lost, as one
/// to a device that is away would be: the device sends its message again.
final class ReplySender: Sendable {
    /// The daemon's client, set once it exists (weakly: the client's handler holds the ingestor, which holds this),
    /// and the agent whose catalog and cache answer devices' questions.
    private struct Target {
        weak var client: MQTTClient?
        weak var agent: Agent?
    }

    private let target = Mutex(Target())
    /// In a group, only the active instance answers: a device must get each reply once.
    private let standing: Standing

    init(standing: Standing) {
        self.standing = standing
    }

    func use(_ client: MQTTClient, agent: Agent) {
        target.withLock {
            $0.client = client
            $0.agent = agent
        }
    }

    /// Answers a device's question (`InboundMessage.query`) from the agent's firmware catalog or cache.
    func answer(_ query: DeviceQuery, from device: String, in dialect: any Dialect) {
        guard standing.isActive, let agent = target.withLock({ $0.agent }) else { return }
        let known: QueryAnswer
        switch query.kind {
        case .firmware:
            let info = agent.cache.device(device)?.info
            let image = agent.firmwareCatalog.latest(for: info?.productId)
            known = .firmware(image.flatMap { FirmwareVersion.isNewer($0.version, than: info?.firmwareVersion) ? $0 : nil })
        case .subDevices:
            known = .subDevices(agent.cache.subDevices(of: device).map { ($0.id, $0.info.productId) })
        case .thingModel:
            known = .thingModel(agent.models.model(for: agent.cache.device(device)?.info.productId))
        }
        if let message = dialect.answer(query, device: device, with: known) { send(message) }
    }

    func send(_ message: OutboundMessage) {
        guard standing.isActive, let client = target.withLock({ $0.client }) else { return }
        try? client.publishFromHandler(message.topic, payload: message.payload)
    }
}
