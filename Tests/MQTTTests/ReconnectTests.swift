import MQTT
import Synchronization
import Testing
import TestSupport

@Suite("Losing and regaining the broker", .timeLimit(.minutes(1)))
struct ReconnectTests {
    @Test(
        "after the broker is killed and restarted, the client reconnects and messages arrive without re-subscribing",
        .timeLimit(.minutes(1)), arguments: [false, true])
    func brokerRestart(persistence: Bool) async throws {
        var options = MosquittoBroker.Options()
        options.persistence = persistence
        try await withBroker(options) { broker in
            var configuration = testConfiguration(broker.url, version: .v311)
            // With persistence the broker keeps the session; without, it forgets it and the client must restore it.
            configuration.cleanSession = !persistence
            let subscriber = try await connectedClient(configuration)
            let states = StateLog(subscriber)
            let inbox = Inbox(subscriber)
            let prefix = uniqueName("things")
            try await subscriber.subscribe([("\(prefix)/+/thing/properties", .atLeastOnce), ("\(prefix)/+/thing/signal", .atMostOnce)])
            if persistence {
                // A killed broker saves nothing at exit: wait for a periodic save that includes the subscription.
                // The broker is single-threaded, so a save logged after one more change comes after the SUBSCRIBE.
                // Two saves, not one: a save that began before the SUBSCRIBE may reach the log only after `before`
                // was read (on a loaded machine), and it alone would let the test kill a broker that never saved
                // the subscription (the restarted one then delivers nothing).
                let saves: @Sendable () -> Int = { broker.log().components(separatedBy: "Saving in-memory database").count }
                let before = saves()
                try await subscriber.publish("\(prefix)/marker", "change", qos: .atLeastOnce, retain: true)
                try await waitUntil(timeout: .seconds(10)) { saves() > before + 1 }
            }

            broker.kill()
            try await waitUntil { if case .reconnecting = subscriber.state { true } else { false } }
            let error = await mqttError { try await subscriber.publish("\(prefix)/x", "while down") }
            #expect(error?.kind == .notConnected)
            try await broker.restart()
            try await waitUntil(timeout: .seconds(10)) { subscriber.state == .connected }

            let publisher = try await connectedClient(testConfiguration(broker.url))
            try await publisher.publish("\(prefix)/dev-1/thing/properties", "p", qos: .atLeastOnce)
            try await publisher.publish("\(prefix)/dev-1/thing/signal", "s", qos: .atMostOnce)
            let messages = try await inbox.waitFor(count: 2, timeout: .seconds(15))
            #expect(Set(messages.map(\.text)) == ["p", "s"])

            let seen = states.states
            let reconnecting = try #require(seen.firstIndex { if case .reconnecting = $0 { true } else { false } })
            #expect(seen.first == .connected)
            #expect(seen[(reconnecting + 1)...].contains(.connected), "states: \(seen)")
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test("the will is published when the client's connection dies, and the client comes back", .timeLimit(.minutes(1)))
    func willOnUncleanDeath() async throws {
        try await withBroker { broker in
            let status = uniqueName("things/dev-1/thing/status")
            let watcher = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(watcher)
            try await watcher.subscribe(status, qos: .atLeastOnce)

            var configuration = testConfiguration(broker.url)
            configuration.will = MQTTWill(topic: status, payload: Array(#"{"status":3}"#.utf8), qos: .atLeastOnce, retain: true)
            let device = try await connectedClient(configuration)
            try await device.publish(status, #"{"status":1}"#, retain: true)
            _ = try await inbox.waitFor(count: 1)

            device.dropConnectionUncleanly()
            let messages = try await inbox.waitFor(count: 2)
            #expect(messages.map(\.text) == [#"{"status":1}"#, #"{"status":3}"#])
            // The will was retained, as a device's offline status is: a late subscriber sees it.
            let late = try await connectedClient(testConfiguration(broker.url))
            let lateInbox = Inbox(late)
            try await late.subscribe(status, qos: .atLeastOnce)
            let retained = try await lateInbox.first(on: status)
            #expect(retained.retain && retained.text == #"{"status":3}"#)
            await late.disconnect()
            // And the device itself reconnected on its own.
            try await waitUntil { device.state == .connected }
            await device.disconnect()
            await watcher.disconnect()
        }
    }

    @Test("disconnect() is clean: the broker does not publish the will", .timeLimit(.minutes(1)))
    func noWillOnDisconnect() async throws {
        try await withBroker { broker in
            let status = uniqueName("things/dev-2/thing/status")
            let watcher = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(watcher)
            try await watcher.subscribe([(status, .atLeastOnce), ("\(status)/marker", .atLeastOnce)])

            var configuration = testConfiguration(broker.url)
            configuration.will = MQTTWill(topic: status, payload: Array("offline".utf8), qos: .atLeastOnce, retain: false)
            let device = try await connectedClient(configuration)
            await device.disconnect()
            // Give the broker time to act on the closed connection, then check nothing but the marker arrived.
            try await Task.sleep(for: .milliseconds(300))
            let other = try await connectedClient(testConfiguration(broker.url))
            try await other.publish("\(status)/marker", "marker")
            _ = try await inbox.first(on: "\(status)/marker")
            #expect(inbox.messages.map(\.text) == ["marker"])
            await other.disconnect()
            await watcher.disconnect()
        }
    }

    @Test("credentials refused on a reconnect stop the client with the error", .timeLimit(.minutes(1)))
    func refusedOnReconnectStops() async throws {
        var options = MosquittoBroker.Options()
        options.users = ["agent": "old-password"]
        try await withBroker(options) { broker in
            let reported = Mutex<[(MQTTConnectionState, MQTTError?)]>([])
            var configuration = testConfiguration(broker.url)
            configuration.username = "agent"
            configuration.password = "old-password"
            let client = try MQTTClient(configuration: configuration, onStateChange: { state, error in
                reported.withLock { $0.append((state, error)) }
            })
            try await client.connect()
            let inbox = Inbox(client)

            try broker.setUsers(["agent": "new-password"])
            try await broker.restart()
            try await waitUntil(timeout: .seconds(10)) { client.state == .stopped }

            let last = try #require(reported.withLock { $0.last })
            #expect(last.0 == .stopped)
            #expect(last.1?.kind == .notAuthorized)
            #expect(client.lastError?.kind == .notAuthorized)
            try await waitUntil { inbox.isFinished }
            #expect(await mqttError { try await client.publish("t", "x") }?.kind == .closed)
            await client.disconnect()  // still fine after the client stopped itself
        }
    }

    @Test("an MQTT 5 session with an expiry interval outlives the connection", .timeLimit(.minutes(1)))
    func sessionExpiryKeepsQueuedMessages() async throws {
        try await withBroker { broker in
            let clientID = uniqueName("agent")
            let topic = uniqueName("things/dev/thing/properties")
            var configuration = testConfiguration(broker.url, clientID, version: .v5)
            configuration.cleanSession = false
            configuration.sessionExpiry = 60

            let first = try await connectedClient(configuration)
            try await first.subscribe(topic, qos: .atLeastOnce)
            await first.disconnect()

            let publisher = try await connectedClient(testConfiguration(broker.url))
            try await publisher.publish(topic, "queued while away", qos: .atLeastOnce)
            await publisher.disconnect()

            // Same client ID, no subscribe: the broker kept the session and its queued message.
            let second = try MQTTClient(configuration: configuration)
            let inbox = Inbox(second)
            try await second.connect()
            #expect(try await inbox.first(on: topic).text == "queued while away")
            await second.disconnect()
        }
    }

    @Test("without an expiry interval an MQTT 5 session ends with the connection", .timeLimit(.minutes(1)))
    func noSessionExpiryLosesSession() async throws {
        try await withBroker { broker in
            let clientID = uniqueName("agent")
            let topic = uniqueName("things/dev/thing/properties")
            var configuration = testConfiguration(broker.url, clientID, version: .v5)
            configuration.cleanSession = false

            let first = try await connectedClient(configuration)
            try await first.subscribe(topic, qos: .atLeastOnce)
            await first.disconnect()
            let publisher = try await connectedClient(testConfiguration(broker.url))
            try await publisher.publish(topic, "lost", qos: .atLeastOnce)
            try await publisher.publish("\(topic)/marker", "marker", qos: .atLeastOnce)
            await publisher.disconnect()

            let second = try MQTTClient(configuration: configuration)
            let inbox = Inbox(second)
            try await second.connect()
            try await second.subscribe("\(topic)/marker", qos: .atLeastOnce)
            try await Task.sleep(for: .milliseconds(300))
            #expect(inbox.messages.isEmpty)
            await second.disconnect()
        }
    }
}
