import Foundation
import MQTT
import Synchronization
import Testing
import TestSupport

@Suite("The client's own status after reconnects, and client ids used twice", .timeLimit(.minutes(1)))
struct ClientIDAndBirthTests {
    @Test("the birth message goes out after every connect, so the retained status is online again after the will")
    func birthAfterEveryConnect() async throws {
        try await withBroker { broker in
            let status = uniqueName("agents/a/status")
            let watcher = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(watcher)
            try await watcher.subscribe(status, qos: .atLeastOnce)

            let connects = Atomic<Int>(0)
            var configuration = testConfiguration(broker.url)
            configuration.will = MQTTWill(topic: status, payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
            configuration.birth = MQTTBirth(topic: status, qos: .atLeastOnce, retain: true) {
                Array("online \(connects.add(1, ordering: .relaxed).newValue)".utf8)
            }
            let client = try await connectedClient(configuration)
            _ = try await inbox.waitFor(count: 1)
            client.dropConnectionUncleanly()
            let messages = try await inbox.waitFor(count: 3, timeout: .seconds(15))
            #expect(messages.prefix(3).map(\.text) == ["online 1", "offline", "online 2"])

            // A late subscriber sees the retained one: online, from the reconnect.
            let late = try await connectedClient(testConfiguration(broker.url))
            let lateInbox = Inbox(late)
            try await late.subscribe(status, qos: .atLeastOnce)
            let retained = try await lateInbox.first(on: status)
            #expect(retained.retain && retained.text == "online 2")
            await late.disconnect()
            await client.disconnect()
            await watcher.disconnect()
        }
    }

    @Test("after a broker restart without persistence the birth message fills the empty retained status")
    func birthAfterBrokerRestart() async throws {
        try await withBroker { broker in
            let status = uniqueName("agents/b/status")
            var configuration = testConfiguration(broker.url)
            configuration.birth = MQTTBirth(topic: status) { Array("online".utf8) }
            let client = try await connectedClient(configuration)
            try await broker.restart()
            try await waitUntil(timeout: .seconds(15)) { client.state == .connected }
            let late = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(late)
            try await late.subscribe(status, qos: .atLeastOnce)
            let retained = try await inbox.first(on: status, timeout: .seconds(10))
            #expect(retained.retain && retained.text == "online")
            await late.disconnect()
            await client.disconnect()
        }
    }

    @Test("two clients with one client id: the error names the id and they back off instead of fighting",
          arguments: [MQTTProtocolVersion.v5, .v311])
    func sameClientID(version: MQTTProtocolVersion) async throws {
        try await withBroker { broker in
            let clientID = uniqueName("twice")
            var configuration = testConfiguration(broker.url, clientID, version: version)
            configuration.reconnectMinDelay = .milliseconds(100)
            configuration.reconnectMaxDelay = .seconds(2)
            let errors = Mutex<[MQTTError]>([])
            let record: @Sendable (MQTTConnectionState, MQTTError?) -> Void = { state, error in
                if case .reconnecting = state, let error { errors.withLock { $0.append(error) } }
            }
            let first = try MQTTClient(configuration: configuration, onStateChange: record)
            try await first.connect()
            let second = try MQTTClient(configuration: configuration, onStateChange: record)
            try await second.connect()

            try await waitUntil(timeout: .seconds(30)) {
                errors.withLock { $0.contains { $0.kind == .clientIDInUse } }
            }
            let reported = try #require(errors.withLock { $0.first { $0.kind == .clientIDInUse } })
            #expect(reported.message.contains("\"\(clientID)\""), "\(reported)")
            #expect(reported.message.contains("another client"), "\(reported)")

            // Counted from the broker's log over four seconds: without backoff the two reconnect every 50-100 ms
            // (dozens of connections); with it, the pauses double up to 2 s. A busy machine only means fewer.
            let connections: @Sendable () -> Int = {
                broker.log().components(separatedBy: " as \(clientID) ").count - 1
            }
            let before = connections()
            try await Task.sleep(for: .seconds(4))
            let during = connections() - before
            #expect(during < 30, "\(during) connections in 4 s")
            await first.disconnect()
            await second.disconnect()
        }
    }
}

@Suite("What a lost connection means for the backoff")
struct ConnectionLossesTests {
    let lost = MQTTError(kind: .notConnected, code: MQTTError.Code.connectionLost, message: "The connection was lost.",
                         context: "connection to mqtt://b lost")

    @Test("the backoff keeps growing only over losses taken for another client; every other loss resets it")
    func backoffCarriesOverTakeovers() {
        let start = ContinuousClock.now
        var configuration = MQTTConfiguration(url: "mqtt://b", clientID: "x")
        configuration.stableConnection = .seconds(10)
        configuration.reconnectMaxDelay = .seconds(2)
        configuration.quickLossesBeforeTakeoverReport = 3
        // Quick losses while the broker stays up: from the third on they are taken for another client.
        var losses = ConnectionLosses(configuration: configuration, connectedAt: start)
        var attempts: [Int] = []
        for n in 1...4 {
            _ = losses.connectionLost(error: lost, serverReason: nil, clientID: "x", at: start + .seconds(2 * n - 1))
            attempts.append(losses.backoffAttempt)
            losses.reconnected(tries: 1, attempt: losses.backoffAttempt + 1, at: start + .seconds(2 * n))
        }
        #expect(attempts == [0, 0, 1, 2])
        // A connection that lasted: a loss of the ordinary kind again.
        _ = losses.connectionLost(error: lost, serverReason: nil, clientID: "x", at: start + .seconds(60))
        #expect(losses.backoffAttempt == 0 && losses.quickLosses == 0)
        // A broker that restarted: the reconnect needed several tries, so the next quick loss is not a takeover.
        losses.reconnected(tries: 3, attempt: 3, at: start + .seconds(61))
        _ = losses.connectionLost(error: lost, serverReason: nil, clientID: "x", at: start + .seconds(62))
        #expect(losses.backoffAttempt == 0 && losses.quickLosses == 0)

        // The broker's word (MQTT 5 reason 0x8E) counts at once.
        var told = ConnectionLosses(configuration: configuration, connectedAt: start)
        told.reconnected(tries: 2, attempt: 4, at: start + .seconds(1))
        _ = told.connectionLost(error: lost, serverReason: 0x8E, clientID: "x", at: start + .seconds(40))
        #expect(told.backoffAttempt == 4)
    }

    @Test("reason 0x8E names the client id at once; without a reason only repeated quick losses do")
    func takeoverReports() {
        let start = ContinuousClock.now
        var configuration = MQTTConfiguration(url: "mqtt://b", clientID: "dup")
        configuration.quickLossesBeforeTakeoverReport = 3
        configuration.protocolVersion = .v5
        var v5 = ConnectionLosses(configuration: configuration, connectedAt: start)
        let taken = v5.connectionLost(error: lost, serverReason: 0x8E, clientID: "dup", at: start + .seconds(300))
        #expect(taken.kind == .clientIDInUse && taken.message.contains("\"dup\""))

        configuration.protocolVersion = .v311
        var v311 = ConnectionLosses(configuration: configuration, connectedAt: start)
        var kinds: [MQTTError.Kind] = []
        for second in 1...3 {
            kinds.append(v311.connectionLost(error: lost, serverReason: nil, clientID: "dup",
                                             at: start + .seconds(second * 2)).kind)
            v311.reconnected(tries: 1, attempt: second, at: start + .seconds(second * 2 + 1))
        }
        #expect(kinds == [.notConnected, .notConnected, .clientIDInUse])
        // Another reason from the broker is said as such, not as a takeover.
        let other = v311.connectionLost(error: lost, serverReason: 0x8B, clientID: "dup", at: start + .seconds(99))
        #expect(other.kind == .notConnected && other.message.contains("the broker closed the connection"))
    }
}
