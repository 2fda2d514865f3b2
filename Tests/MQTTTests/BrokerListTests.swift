import MQTT
import Testing
import TestSupport

@Suite("A list of brokers, and MQTT 5 or 3.1.1 per broker", .timeLimit(.minutes(3)))
struct BrokerListTests {
    static func listConfiguration(_ brokers: [String], version: MQTTProtocolVersion = .v311) -> MQTTConfiguration {
        var configuration = testConfiguration(brokers[0], version: version)
        configuration.brokers = brokers
        return configuration
    }

    @Test("the first connect takes the first broker of the list that accepts")
    func firstThatAccepts() async throws {
        try await withBroker { first in
            try await withBroker { second in
                let down = "mqtt://127.0.0.1:\(try freeLoopbackPort())"
                let client = try await connectedClient(Self.listConfiguration([down, first.url, second.url]))
                #expect(client.broker.url == first.url)
                #expect(client.broker.version == .v311)
                await client.disconnect()
            }
        }
    }

    @Test("no broker of the list up: the first connect fails at once with an error naming each")
    func noneUp() async throws {
        let urls = ["mqtt://127.0.0.1:\(try freeLoopbackPort())", "mqtt://127.0.0.1:\(try freeLoopbackPort())"]
        let client = try MQTTClient(configuration: Self.listConfiguration(urls))
        let error = await mqttError { try await client.connect() }
        #expect(error?.kind == .connectionRefused)
        for url in urls { #expect(error?.description.contains(url) == true, "\(String(describing: error))") }
        #expect(client.state == .idle)
    }

    @Test("an empty list, a bad URL or a list mixing mqtt:// and mqtts:// is refused, saying which")
    func badLists() async throws {
        for (brokers, expected) in [([String](), "no broker given"),
                                    (["mqtt://127.0.0.1:1883", "http://x"], "unsupported scheme"),
                                    (["mqtt://127.0.0.1:1883", "mqtts://127.0.0.1:8883"], "all use mqtt:// or all mqtts://")] {
            var configuration = MQTTConfiguration(brokers: brokers, clientID: "list")
            configuration.protocolVersion = .v311
            do {
                _ = try MQTTClient(configuration: configuration)
                Issue.record("\(brokers) was taken")
            } catch {
                #expect(error.kind == .invalidURL)
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }

    @Test("a lost connection goes on with the next broker, round the list, and the subscriptions come along")
    func roundTheList() async throws {
        try await withBroker { first in
            try await withBroker { second in
                let client = try await connectedClient(Self.listConfiguration([first.url, second.url]))
                let inbox = Inbox(client)
                let topic = uniqueName("list")
                try await client.subscribe(topic, qos: .atLeastOnce)

                first.kill()
                try await waitUntil(timeout: .seconds(20)) { client.state == .connected && client.broker.url == second.url }
                let onSecond = try await connectedClient(testConfiguration(second.url))
                try await onSecond.publish(topic, "second", qos: .atLeastOnce)
                try await inbox.waitFor(count: 1, timeout: .seconds(10))

                // Round the list: the first broker is back, the second goes.
                try await first.restart()
                second.kill()
                try await waitUntil(timeout: .seconds(20)) { client.state == .connected && client.broker.url == first.url }
                let onFirst = try await connectedClient(testConfiguration(first.url))
                try await onFirst.publish(topic, "first", qos: .atLeastOnce)
                let messages = try await inbox.waitFor(count: 2, timeout: .seconds(10))
                #expect(messages.map(\.text) == ["second", "first"])
                await onFirst.disconnect()
                await onSecond.disconnect()
                await client.disconnect()
            }
        }
    }

    @Test("auto speaks MQTT 5 to mosquitto and 3.1.1 to NATS, which refuses 5; a client set to 5 gets NATS's refusal")
    func autoPerBroker() async throws {
        try await withNATSCluster { cluster in
            try await withBroker { mosquitto in
                var configuration = Self.listConfiguration([cluster.mqttURL(0), mosquitto.url], version: .auto)
                configuration.username = "devices"
                configuration.password = NATSCluster.passwords["devices"]
                configuration.cleanSession = false
                configuration.sessionExpiry = 60
                let client = try await connectedClient(configuration)
                #expect(client.broker.url == cluster.mqttURL(0))
                #expect(client.broker.version == .v311)
                let topic = uniqueName("auto")
                try await client.subscribe(topic, qos: .atLeastOnce)
                // MQTT 5 properties are left out under 3.1.1 instead of failing the publish.
                try await client.publish(topic, payload: Array("on nats".utf8), qos: .atLeastOnce,
                                         responseTopic: "replies/x", correlationData: [1])

                cluster.kill(0)
                try await waitUntil(timeout: .seconds(20)) { client.state == .connected && client.broker.url == mosquitto.url }
                #expect(client.broker.version == .v5)

                var five = testConfiguration(cluster.mqttURL(1), version: .v5)
                five.username = "devices"
                five.password = NATSCluster.passwords["devices"]
                let refused = try MQTTClient(configuration: five)
                let error = await mqttError { try await refused.connect() }
                #expect(error?.kind == .connectionRefused)
                #expect(error?.code == 0x84, "\(String(describing: error))")
                #expect(error?.message.lowercased().contains("protocol version") == true, "\(String(describing: error))")
                await client.disconnect()
            }
        }
    }
}
