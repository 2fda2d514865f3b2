import MQTT
import Testing
import TestSupport

@Suite("Cancelled callers stop waiting, and what they sent still goes out", .timeLimit(.minutes(1)))
struct CancellationTests {
    @Test("a QoS 1 publish from a cancelled task is sent; only the wait for the PUBACK is given up")
    func cancelledPublishIsSent() async throws {
        try await withBroker { broker in
            let topic = uniqueName("last/words")
            let watcher = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(watcher)
            try await watcher.subscribe(topic, qos: .atLeastOnce)
            let client = try await connectedClient(testConfiguration(broker.url))
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return await mqttError { try await client.publish(topic, "goodbye", qos: .atLeastOnce) }
            }
            #expect(await task.value?.message.contains("cancelled") == true)
            #expect(try await inbox.first(on: topic).text == "goodbye")
            await client.disconnect()
            await watcher.disconnect()
        }
    }

    @Test("a publish waiting on a broker that stopped answering returns when its task is cancelled")
    func cancelledWaitReturns() async throws {
        try await withBroker { broker in
            let error = try await cancelledWhileBrokerPaused(broker) { client in
                await mqttError { try await client.publish("paused/broker", "x", qos: .atLeastOnce) }
            }
            #expect(error?.kind == .notConnected)
        }
    }
}
