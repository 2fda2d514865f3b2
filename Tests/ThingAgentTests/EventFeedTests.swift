import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The event feed (`publishEvents`) as a service subscribed to it sees it, on a real broker.
@Suite("The event feed under a burst of reports", .timeLimit(.minutes(2)))
struct EventFeedTests {
    @Test("a burst of reports from one device comes out on the feed whole and in order, at QoS 1 and QoS 0",
          arguments: [1, 0])
    func burstComesOutInOrder(eventsQoS: Int) async throws {
        let count = 600
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = agentConfiguration(broker, directory: directory)
            configuration.events.qos = eventsQoS
            // Room for the whole burst: this checks order and completeness, not what a full queue drops.
            configuration.events.queueLimit = 10 * count
            let feed = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/burst/properties")
            let agent = try Agent(configuration: configuration)
            let running = try await agent.runUntilSubscribed()
            defer { running.cancel() }

            // All reports at once, as a device catching up after an outage would send them.
            let device = try MQTTClient(configuration: MQTTConfiguration(
                url: broker.url, clientID: "burst-\(UInt32.random(in: 0...UInt32.max))"))
            try await device.connect()
            let reports = (0..<count).map { n in
                (topic: "things/burst/thing/properties",
                 payload: Array(#"{"time":\#(t0 + Int64(n)),"data":{"level":\#(n)}}"#.utf8))
            }
            let sent = await device.publish(inOrder: reports, qos: .atLeastOnce)
            #expect(sent.allSatisfy { if case .success = $0 { true } else { false } })

            let events = try await feed.waitFor(count: count, timeout: .seconds(60))
            let levels = events.map { event -> Int64? in
                let json = try? JSONParser.parse(event.payload)
                return json?["data"]?["level"]?["value"]?.int64Value
            }
            #expect(levels == (0..<count).map { Int64($0) })
            #expect(agent.cache.device("burst")?.properties["level"]?.value == .integer(Int64(count - 1)))
            // The subscriber can see the last event before the agent has its PUBACK and counts the batch.
            try await waitUntil(timeout: .seconds(30)) { agent.integration.snapshot.eventsPublished >= count }
            #expect(agent.events.dropped == 0)
            await device.disconnect()
            await feed.stop()
            running.cancel()
            _ = try? await running.value
        }
    }

    /// A stop in the middle of a burst: what the feed took from its queue and did not send, and what the queue
    /// still held, is counted as not sent; no event leaves the metrics unaccounted for.
    @Test("events the feed holds when it stops are counted as not sent, and it takes one batch at a time")
    func eventsHeldAtStopAreCounted() async throws {
        let count = 1_000
        try await withBroker { broker in
            let client = try MQTTClient(configuration: MQTTConfiguration(
                url: broker.url, clientID: "feed-\(UInt32.random(in: 0...UInt32.max))"))
            try await client.connect()
            let channel = EventChannel(limit: 4_096)
            let stream = DeviceEventStream(registration: .init(channel: channel, onEnd: {}))
            let events = (0..<count).map { n in
                DeviceEvent.statusChanged(deviceId: "held", online: n % 2 == 0, time: t0 + Int64(n))
            }
            #expect(channel.send(events) == 0)
            let counters = IntegrationCounters()
            let feed = Task {
                // Runs only once the stop has been asked for, as when SIGTERM lands while a burst is queued.
                try? await Task.sleep(for: .seconds(600))
                await EventPublisher.run(stream, client: client, prefix: "thing-agent/events", counters: counters)
            }
            feed.cancel()
            await feed.value
            let snapshot = counters.snapshot
            #expect(snapshot.eventsPublished + snapshot.eventsNotSent == count, "\(snapshot)")
            #expect(snapshot.eventsNotSent == count, "nothing is sent after the stop: \(snapshot)")

            // One batch is taken at a time; the rest stays in the bounded queue, so what the feed holds is the
            // queue's limit plus the one batch it is sending.
            let bounded = EventChannel(limit: count)
            #expect(bounded.send(events) == 0)
            #expect(await bounded.take(atMost: EventPublisher.batchLimit)?.count == EventPublisher.batchLimit)
            #expect(bounded.send(events) == count - EventPublisher.batchLimit, "room only for the batch taken")
            await client.disconnect()
        }
    }
}
