import Foundation
import MQTT
import Synchronization
import Testing
import TestSupport

/// A connected client of the shipped broker that records every payload it receives, to tell what an ACL let
/// through: a writer publishes a token, then a marker the reader may receive; once the marker is in, the token
/// either came before it (allowed) or never will (denied). One writer's QoS 1 messages arrive in order.
final class BrokerProbe: Sendable {
    let client: MQTTClient
    private let payloads = Mutex<[String]>([])

    private init(client: MQTTClient) {
        self.client = client
    }

    /// Connects `client` and subscribes to `filters` one by one; a filter the ACL refuses is skipped (the
    /// broker may refuse it at SUBACK or only drop what it would deliver: either way nothing arrives).
    static func connect(_ client: MQTTClient, subscribing filters: [String]) async throws -> BrokerProbe {
        let probe = BrokerProbe(client: client)
        let stream = client.messages
        Task { [probe] in
            for await message in stream {
                probe.payloads.withLock { $0.append(String(decoding: message.payload, as: UTF8.self)) }
            }
        }
        try await client.connect()
        for filter in filters { try? await client.subscribe(filter, qos: .atLeastOnce) }
        return probe
    }

    func saw(_ payload: String) -> Bool { payloads.withLock { $0.contains(payload) } }

    func payloadsContaining(_ text: String) -> Int { payloads.withLock { $0.filter { $0.contains(text) }.count } }

    func waitFor(_ payload: String, timeout: Duration = .seconds(15)) async throws {
        try await waitUntil(timeout: timeout) { self.saw(payload) }
    }

    func disconnect() async { await client.disconnect() }
}

/// Whether `writer` publishing on `topic` reaches `reader`; `marker` is a topic `writer` may write and `reader`
/// may read.
func reaches(_ writer: MQTTClient, _ topic: String, _ reader: BrokerProbe, marker: String) async throws -> Bool {
    let token = "token-\(UInt64.random(in: 0...UInt64.max))"
    try? await writer.publish(topic, payload: Array(token.utf8), qos: .atLeastOnce)
    let mark = "marker-\(UInt64.random(in: 0...UInt64.max))"
    try await writer.publish(marker, payload: Array(mark.utf8), qos: .atLeastOnce)
    try await reader.waitFor(mark)
    return reader.saw(token)
}

/// Expects each `allowed` topic `writer` publishes to reach `reader`, and no `denied` one.
func expectAccess(_ writer: MQTTClient, allowed: [String], denied: [String], reaching reader: BrokerProbe,
                  marker: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for topic in allowed {
        #expect(try await reaches(writer, topic, reader, marker: marker), "\(topic) must be allowed",
                sourceLocation: sourceLocation)
    }
    for topic in denied {
        #expect(try await !reaches(writer, topic, reader, marker: marker), "\(topic) must be denied",
                sourceLocation: sourceLocation)
    }
}
