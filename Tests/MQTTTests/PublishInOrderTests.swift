import MQTT
import Testing
import TestSupport

@Suite("Several messages published at once, in order", .timeLimit(.minutes(1)))
struct PublishInOrderTests {
    @Test("every message arrives, in the order given, and each outcome is a success",
          arguments: [MQTTProtocolVersion.v311, .v5], [QoS.atMostOnce, .atLeastOnce, .exactlyOnce])
    func inOrder(version: MQTTProtocolVersion, qos: QoS) async throws {
        try await withBroker { broker in
            let topic = uniqueName("events/dev")
            let subscriber = try await connectedClient(testConfiguration(broker.url, version: version))
            let inbox = Inbox(subscriber)
            // At most QoS 1 on the receiving side: a libmosquitto 2.0.11 client receiving a burst at QoS 2 under MQTT 5
            // sometimes stalls after 40 messages (mosquitto_pub -l and mosquitto_sub -V 5 -q 2 failed such a burst
            // too); the publisher's side is what is checked here.
            try await subscriber.subscribe(topic + "/#", qos: qos == .exactlyOnce ? .atLeastOnce : qos)
            var configuration = testConfiguration(broker.url, version: version)
            // Fewer in flight than the batch holds: the rest wait in the library and still go out in order.
            configuration.sendMaximum = 7
            let publisher = try await connectedClient(configuration)
            let messages = (0..<300).map { (topic: "\(topic)/\($0 % 3)", payload: Array("\($0)".utf8)) }

            let outcomes = await publisher.publish(inOrder: messages, qos: qos)

            #expect(outcomes.count == 300)
            #expect(outcomes.allSatisfy { if case .success = $0 { true } else { false } })
            let received = try await inbox.waitFor(count: 300, timeout: .seconds(60))
            #expect(received.map(\.text) == (0..<300).map { "\($0)" })
            #expect(received.map(\.topic) == messages.map(\.topic))
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("when not connected, every message fails alone with notConnected and nothing waits")
    func notConnected() async throws {
        try await withBroker { broker in
            let client = try MQTTClient(configuration: testConfiguration(broker.url))
            let outcomes = await client.publish(inOrder: [("a", [1]), ("b", [2])], qos: .atLeastOnce)
            #expect(outcomes.count == 2)
            for outcome in outcomes {
                guard case .failure(let error) = outcome else {
                    Issue.record("a message was sent without a connection")
                    continue
                }
                #expect(error.kind == .notConnected)
            }
            #expect(await client.publish(inOrder: [], qos: .atLeastOnce).isEmpty)
        }
    }

    @Test("a batch waiting on a broker that stopped answering returns when its task is cancelled")
    func cancelledWaitReturns() async throws {
        try await withBroker { broker in
            let outcomes = try await cancelledWhileBrokerPaused(broker) { client in
                await client.publish(inOrder: [("paused/a", [1]), ("paused/b", [2])], qos: .atLeastOnce)
            }
            #expect(outcomes.count == 2)
            #expect(outcomes.allSatisfy { if case .failure(let error) = $0 { error.kind == .notConnected } else { false } })
        }
    }

    @Test("a send maximum outside 1...65535 is refused when the client is made")
    func sendMaximumBounds() throws {
        for bad in [0, 65536] {
            var configuration = testConfiguration("mqtt://127.0.0.1:1883")
            configuration.sendMaximum = bad
            #expect(throws: MQTTError.self) { _ = try MQTTClient(configuration: configuration) }
        }
    }
}
