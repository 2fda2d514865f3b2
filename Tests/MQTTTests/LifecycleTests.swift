import MQTT
import Testing
import TestSupport

@Suite("Operations waiting for an acknowledgement", .timeLimit(.minutes(1)))
struct PendingOperationTests {
    @Test("a QoS 1 publish waiting for its PUBACK fails with .notConnected when the connection is lost",
          .timeLimit(.minutes(1)))
    func pendingPublishFailsOnConnectionLoss() async throws {
        try await withBroker { broker in
            let client = try await connectedClient(testConfiguration(broker.url))
            broker.pause()
            let publishing = Task { await mqttError { try await client.publish("pending", "x", qos: .atLeastOnce) } }
            try await Task.sleep(for: .milliseconds(200))
            broker.kill()
            let error = await publishing.value
            #expect(error?.kind == .notConnected, "got \(String(describing: error))")
            await client.disconnect()
        }
    }

    @Test("operations waiting for an acknowledgement fail with .closed on disconnect()", .timeLimit(.minutes(1)))
    func pendingOperationsFailOnDisconnect() async throws {
        try await withBroker { broker in
            let client = try await connectedClient(testConfiguration(broker.url))
            broker.pause()
            let publishing = Task { await mqttError { try await client.publish("pending", "x", qos: .exactlyOnce) } }
            let subscribing = Task { await mqttError { try await client.subscribe("pending", qos: .atLeastOnce) } }
            try await Task.sleep(for: .milliseconds(200))
            await client.disconnect()
            #expect(await publishing.value?.kind == .closed)
            #expect(await subscribing.value?.kind == .closed)
            #expect(client.state == .stopped)
            broker.resume()
        }
    }
}

@Suite("Client lifetime", .timeLimit(.minutes(1)))
struct LifetimeTests {
    @Test("dropping the last reference disconnects cleanly (no will) and frees the connection", .timeLimit(.minutes(1)))
    func releaseDisconnects() async throws {
        try await withBroker { broker in
            let status = uniqueName("things/dev-3/thing/status")
            let watcher = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(watcher)
            try await watcher.subscribe([(status, .atLeastOnce), ("\(status)/marker", .atLeastOnce)])

            let clientID = uniqueName("short-lived")
            var configuration = testConfiguration(broker.url, clientID)
            configuration.will = MQTTWill(topic: status, payload: Array("offline".utf8))
            do {
                let device = try await connectedClient(configuration)
                try await device.publish("\(status)/marker", "alive")
            }
            try await waitUntil { broker.log().contains("Client \(clientID) disconnected.") }
            try await watcher.publish("\(status)/marker", "end")
            try await waitUntil { inbox.messages.count >= 2 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(inbox.messages.map(\.text) == ["alive", "end"])
            await watcher.disconnect()
        }
    }
}
