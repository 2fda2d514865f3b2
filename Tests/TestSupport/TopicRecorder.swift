import Foundation
import MQTT
import Synchronization

/// A raw MQTT client that records everything published on a topic filter, to check exactly what went out
/// (and that nothing did).
public final class TopicRecorder: Sendable {
    public let client: MQTTClient
    private let received = Mutex<[MQTTMessage]>([])

    private init(client: MQTTClient) {
        self.client = client
    }

    /// Connects, subscribes to `filter` at QoS 1, and records from then on.
    public static func start(_ brokerURL: String, filter: String) async throws -> TopicRecorder {
        let client = try MQTTClient(configuration: MQTTConfiguration(
            url: brokerURL, clientID: "recorder-\(UInt32.random(in: 0...UInt32.max))"))
        let recorder = TopicRecorder(client: client)
        let stream = client.messages
        Task { [recorder] in
            for await message in stream { recorder.received.withLock { $0.append(message) } }
        }
        try await client.connect()
        try await client.subscribe(filter, qos: .atLeastOnce)
        return recorder
    }

    public var messages: [MQTTMessage] { received.withLock { $0 } }

    /// Waits until at least `count` messages arrived and returns all of them.
    @discardableResult
    public func waitFor(count: Int, timeout: Duration = .seconds(5)) async throws -> [MQTTMessage] {
        try await waitUntil(timeout: timeout) { self.messages.count >= count }
        return messages
    }

    public func stop() async {
        await client.disconnect()
    }
}
