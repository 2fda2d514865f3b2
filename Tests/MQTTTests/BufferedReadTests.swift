import MQTT
import Synchronization
import Testing
import TestSupport

/// libmosquitto's reads of a plain-TCP socket are served from the network thread's buffer (one read(2) fills it;
/// the library asked for a byte at a time). Packets that straddle the buffer's refills, or are larger than it, still
/// arrive whole and in order.
@Suite("Buffered socket reads", .timeLimit(.minutes(2)))
struct BufferedReadTests {
    @Test("the library's reads are buffered here")
    func readsAreBuffered() throws {
        _ = try MQTTClient(configuration: testConfiguration("mqtt://127.0.0.1:1"))
        #expect(MQTTClient.unbufferedReads == nil)
    }

    /// Payload sizes around the buffer's 64 KiB and the remaining-length field's steps, between runs of small
    /// messages, each payload a pattern of its own index: a byte lost, doubled or taken from another packet shows.
    @Test("messages smaller and larger than the buffer arrive whole and in order",
          arguments: [MQTTProtocolVersion.v311, .v5])
    func mixedSizes(version: MQTTProtocolVersion) async throws {
        try await withBroker { broker in
            let sizes = [1, 2, 127, 128, 16_383, 16_384, 65_535, 65_536, 65_537, 131_075, 300_000]
            let payloads = sizes.enumerated().flatMap { index, size in
                (0..<40).map { small in pattern(index * 100 + small, size: 10 + small % 5) } + [pattern(index, size: size)]
            }
            let topic = uniqueName("buffered")
            let received = Mutex<[[UInt8]]>([])
            let subscriber = try await connectedClient(testConfiguration(broker.url, version: version),
                                                       streamMessages: false) { message in
                received.withLock { $0.append(message.payload) }
            }
            try await subscriber.subscribe(topic, qos: .atLeastOnce)
            let publisher = try await connectedClient(testConfiguration(broker.url, version: version))
            // Pipelined, so that the subscriber's socket holds many packets at a time.
            let outcomes = await publisher.publish(inOrder: payloads.map { (topic, $0) }, qos: .atLeastOnce)
            for outcome in outcomes { try outcome.get() }
            try await waitUntil(timeout: .seconds(30)) { received.withLock { $0.count } >= payloads.count }
            let got = received.withLock { $0 }
            #expect(got.count == payloads.count)
            #expect(got.map(\.count) == payloads.map(\.count))
            #expect(got == payloads)
            await publisher.disconnect()
            await subscriber.disconnect()
        }
    }

    private func pattern(_ seed: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &* 7 &+ $0 >> 8) }
    }
}
