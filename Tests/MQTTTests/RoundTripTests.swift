import MQTT
import Synchronization
import Testing
import TestSupport

@Suite("Publish and subscribe round trips", .timeLimit(.minutes(1)))
struct RoundTripTests {
    @Test("a message comes back at the QoS it was sent", .timeLimit(.minutes(1)),
          arguments: [MQTTProtocolVersion.v311, .v5], QoS.allCases)
    func roundTrip(version: MQTTProtocolVersion, qos: QoS) async throws {
        try await withBroker { broker in
            let subscriber = try await connectedClient(testConfiguration(broker.url, version: version))
            let publisher = try await connectedClient(testConfiguration(broker.url, version: version))
            let inbox = Inbox(subscriber)
            let topic = uniqueName("things/dev/thing/properties")
            try await subscriber.subscribe(topic, qos: qos)

            try await publisher.publish(topic, payload: [0, 1, 2, 255], qos: qos)
            try await publisher.publish(topic, "second", qos: qos)

            let messages = try await inbox.waitFor(count: 2)
            #expect(messages.map(\.topic) == [topic, topic])
            #expect(messages[0].payload == [0, 1, 2, 255])
            #expect(messages[1].text == "second")
            #expect(messages.allSatisfy { $0.qos == qos && !$0.retain })
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }
}
