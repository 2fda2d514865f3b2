import MQTT
import Synchronization
import Testing
import TestSupport

@Suite("A queued backlog", .timeLimit(.minutes(3)))
struct BacklogTests {
    /// A loop turn reads every packet waiting and acknowledges them together: each message arrives once, in order,
    /// and every one is acknowledged, so the session holds nothing to send again afterwards.
    @Test("a backlog for a persistent session arrives once, in order, and is all acknowledged",
          .timeLimit(.minutes(3)), arguments: [MQTTProtocolVersion.v311, .v5])
    func backlogDrainedAndAcknowledged(version: MQTTProtocolVersion) async throws {
        try await withBroker { broker in
            let backlog = try await QueuedBacklog(broker, "backlog", version: version)
            let (session, topic, publisher, count) = (backlog.session, backlog.topic, backlog.publisher, backlog.count)
            let received = Mutex<[String]>([])
            let draining = try await connectedClient(session, streamMessages: false) { message in
                received.withLock { $0.append(message.text) }
            }
            try await waitUntil(timeout: .seconds(20)) { received.withLock { $0.count } >= count }
            #expect(received.withLock { $0 } == (0..<count).map { "\($0)" })
            // A fence: the broker handles a connection's packets in order, so its SUBACK comes after it took every
            // PUBACK written before. (A DISCONNECT is not one: the next connect may take the session over while
            // the broker still holds unread PUBACKs of this connection, and it then sends those messages again.)
            try await draining.subscribe(uniqueName("fence"), qos: .atLeastOnce)
            await draining.disconnect()

            // Anything left unacknowledged is sent again at the next connect, before newer messages.
            let again = Mutex<[String]>([])
            let later = try await connectedClient(session, streamMessages: false) { message in
                again.withLock { $0.append(message.text) }
            }
            try await publisher.publish(topic, "marker", qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(10)) { again.withLock { $0.contains("marker") } }
            #expect(again.withLock { $0 } == ["marker"])
            await later.disconnect()
            await publisher.disconnect()
        }
    }

    /// A stop while the backlog streams in: what the client handled before it is acknowledged, and the broker sees
    /// a clean DISCONNECT. (The library closes the socket right after writing the DISCONNECT; closed with unread
    /// data, a socket is reset and drops what it still held, so nothing of a turn may wait in a cork then.)
    @Test("a disconnect in the middle of a backlog acknowledges what was handled before it",
          .timeLimit(.minutes(3)), arguments: [MQTTProtocolVersion.v311, .v5])
    func disconnectInTheMiddleOfABacklog(version: MQTTProtocolVersion) async throws {
        try await withBroker { broker in
            let backlog = try await QueuedBacklog(broker, "midstop", version: version)
            let (session, topic, publisher, count) = (backlog.session, backlog.topic, backlog.publisher, backlog.count)
            let received = Mutex<[String]>([])
            let draining = try await connectedClient(session, streamMessages: false) { message in
                received.withLock { $0.append(message.text) }
            }
            try await waitUntil(timeout: .seconds(20)) { received.withLock { $0.count } >= 300 }
            let handledBeforeStop = received.withLock { $0.count }
            await draining.disconnect()
            // The broker reads a connection's packets in order: once it logged this connection's DISCONNECT (the
            // second of the session: the first is the subscribing connection's), it has taken every PUBACK written
            // before it. A connection reset instead drops what it still held and logs no DISCONNECT.
            let disconnected = "Client \(session.clientID) disconnected."
            try await waitUntil(timeout: .seconds(10)) {
                broker.log().components(separatedBy: disconnected).count - 1 >= 2
            }
            let handled = received.withLock { $0 }

            let again = Mutex<[String]>([])
            let later = try await connectedClient(session, streamMessages: false) { message in
                again.withLock { $0.append(message.text) }
            }
            try await publisher.publish(topic, "marker", qos: .atLeastOnce)
            try await waitUntil(timeout: .seconds(20)) { again.withLock { $0.contains("marker") } }
            let redelivered = again.withLock { $0 }.filter { $0 != "marker" }
            let sentAgainTooSoon = Set(redelivered).intersection(handled.prefix(handledBeforeStop))
            #expect(sentAgainTooSoon.isEmpty, "handled before the stop, yet sent again: \(sentAgainTooSoon.count)")
            #expect(Set(handled + redelivered) == Set((0..<count).map { "\($0)" }), "nothing is lost")
            await later.disconnect()
            await publisher.disconnect()
        }
    }
}

/// A persistent session that subscribed and went away, and `count` QoS 1 messages ("0", "1", …) queued for it.
private struct QueuedBacklog {
    let session: MQTTConfiguration
    let topic = uniqueName("things/dev/thing/properties")
    let publisher: MQTTClient
    /// Below mosquitto's default max_queued_messages (1000), so the broker keeps all of it.
    let count = 900

    init(_ broker: MosquittoBroker, _ name: String, version: MQTTProtocolVersion) async throws {
        var session = testConfiguration(broker.url, uniqueName(name), version: version)
        session.cleanSession = false
        if version == .v5 { session.sessionExpiry = 300 }
        self.session = session
        let first = try await connectedClient(session)
        try await first.subscribe(topic, qos: .atLeastOnce)
        await first.disconnect()
        publisher = try await connectedClient(testConfiguration(broker.url, version: version))
        for index in 0..<count {
            try await publisher.publish(topic, "\(index)", qos: .atLeastOnce)
        }
    }
}
