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

@Suite("Message delivery details", .timeLimit(.minutes(1)))
struct DeliveryTests {
    @Test("a retained message is delivered to a later subscriber, flagged retained", .timeLimit(.minutes(1)))
    func retainedOnSubscribe() async throws {
        try await withBroker { broker in
            let topic = uniqueName("things/dev/thing/status")
            let publisher = try await connectedClient(testConfiguration(broker.url))
            try await publisher.publish(topic, #"{"status":1}"#, qos: .atLeastOnce, retain: true)
            await publisher.disconnect()

            let subscriber = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(subscriber)
            try await subscriber.subscribe(topic, qos: .atLeastOnce)
            let message = try await inbox.first(on: topic)
            #expect(message.retain)
            #expect(message.text == #"{"status":1}"#)
            await subscriber.disconnect()
        }
    }

    @Test("onMessage has run for a message before the stream yields it", .timeLimit(.minutes(1)))
    func handlerRunsBeforeStream() async throws {
        try await withBroker { broker in
            let handled = Mutex<[[UInt8]]>([])
            let subscriber = try await connectedClient(testConfiguration(broker.url)) { message in
                handled.withLock { $0.append(message.payload) }
            }
            let topic = uniqueName("order")
            try await subscriber.subscribe(topic, qos: .atLeastOnce)
            let publisher = try await connectedClient(testConfiguration(broker.url))
            for index in 0..<50 {
                try await publisher.publish(topic, payload: [UInt8(index)], qos: .atLeastOnce)
            }
            var seenBeforeStream: [Bool] = []
            var streamed: [[UInt8]] = []
            for await message in subscriber.messages {
                seenBeforeStream.append(handled.withLock { $0.contains(message.payload) })
                streamed.append(message.payload)
                if streamed.count == 50 { break }
            }
            #expect(seenBeforeStream.allSatisfy { $0 })
            #expect(streamed == (0..<50).map { [UInt8($0)] }, "the stream keeps arrival order")
            #expect(handled.withLock { $0 } == streamed)
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("MQTT 5 response topic and correlation data arrive with the message", .timeLimit(.minutes(1)))
    func requestResponseProperties() async throws {
        try await withBroker { broker in
            let device = try await connectedClient(testConfiguration(broker.url, version: .v5))
            let agent = try await connectedClient(testConfiguration(broker.url, version: .v5))
            let deviceInbox = Inbox(device)
            let agentInbox = Inbox(agent)
            let request = uniqueName("things/dev/thing/info/get")
            let reply = request + "_response"
            try await device.subscribe(request, qos: .atLeastOnce)
            try await agent.subscribe(reply, qos: .atLeastOnce)

            try await agent.publish(request, payload: Array("{}".utf8), responseTopic: reply, correlationData: [9, 8, 7])
            let received = try await deviceInbox.first(on: request)
            #expect(received.responseTopic == reply)
            #expect(received.correlationData == [9, 8, 7])

            // The device answers where it was told to, echoing the correlation data.
            try await device.publish(
                try #require(received.responseTopic), payload: Array("ok".utf8),
                correlationData: received.correlationData)
            let answer = try await agentInbox.first(on: reply)
            #expect(answer.correlationData == [9, 8, 7])
            #expect(answer.responseTopic == nil)
            await agent.disconnect()
            await device.disconnect()
        }
    }

    @Test("under MQTT 3.1.1 the MQTT 5 properties are absent", .timeLimit(.minutes(1)))
    func noPropertiesUnder311() async throws {
        try await withBroker { broker in
            let client = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(client)
            let topic = uniqueName("plain")
            try await client.subscribe(topic, qos: .atLeastOnce)
            try await client.publish(topic, payload: [1], responseTopic: "ignored", correlationData: [1])
            let message = try await inbox.first(on: topic)
            #expect(message.responseTopic == nil)
            #expect(message.correlationData == nil)
            await client.disconnect()
        }
    }

    @Test("after unsubscribe no more messages arrive on that filter", .timeLimit(.minutes(1)))
    func unsubscribeStopsDelivery() async throws {
        try await withBroker { broker in
            let client = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(client)
            let prefix = uniqueName("things")
            try await client.subscribe([("\(prefix)/+/thing/signal", .atMostOnce), ("\(prefix)/marker", .atLeastOnce)])
            try await client.publish("\(prefix)/a/thing/signal", "before", qos: .atLeastOnce)
            _ = try await inbox.first(on: "\(prefix)/a/thing/signal")

            try await client.unsubscribe("\(prefix)/+/thing/signal")
            try await client.publish("\(prefix)/a/thing/signal", "after", qos: .atLeastOnce)
            try await client.publish("\(prefix)/marker", "marker", qos: .atLeastOnce)
            _ = try await inbox.first(on: "\(prefix)/marker")
            #expect(inbox.messages.map(\.text) == ["before", "marker"])
            await client.disconnect()
        }
    }

    @Test("a QoS 1 publish returns only once the broker acknowledged it", .timeLimit(.minutes(1)))
    func qos1WaitsForPuback() async throws {
        try await withBroker { broker in
            let topic = uniqueName("acked")
            let client = try await connectedClient(testConfiguration(broker.url))
            let returned = Flag()

            broker.pause()  // the broker receives nothing and answers nothing until resumed
            // QoS 0 needs no answer: it returns although the broker is frozen.
            try await client.publish(topic, "fire and forget", qos: .atMostOnce)
            let publishing = Task {
                try await client.publish(topic, "needs an ack", qos: .atLeastOnce, retain: true)
                returned.set()
            }
            try await Task.sleep(for: .milliseconds(500))
            #expect(!returned.isSet, "publish returned without a PUBACK")

            broker.resume()
            try await publishing.value
            #expect(returned.isSet)

            // Acknowledged means stored: a new subscriber gets the retained message at once.
            let reader = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(reader)
            try await reader.subscribe(topic, qos: .atLeastOnce)
            #expect(try await inbox.first(on: topic).text == "needs an ack")
            await reader.disconnect()
            await client.disconnect()
        }
    }
}
