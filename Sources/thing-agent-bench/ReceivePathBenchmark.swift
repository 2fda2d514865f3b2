import Foundation
import MQTT
import ThingAgent

/// The agent's own cost per message, without the broker or libmosquitto: messages fed straight into the
/// receive path (decode, stale rules, cache write, listener dispatch).
struct ReceivePathBenchmark {
    let directory: String

    func run(_ messages: [(topic: String, payload: [UInt8])], store: Bool = true) async throws -> Double {
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/receive-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let agent = try Agent(configuration: configuration, role: store ? .daemon : .observer)
        let token = agent.events.addListener { _ in }
        let prepared = messages.map { MQTTMessage(topic: $0.topic, payload: $0.payload, qos: .atLeastOnce, retain: false) }
        let seconds = await Measure.seconds {
            for message in prepared { agent.receive(message) }
        }
        token.cancel()
        return seconds / Double(messages.count) * 1e6
    }
}
