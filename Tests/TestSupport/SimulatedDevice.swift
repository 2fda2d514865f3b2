import Foundation
import MQTT

/// Milliseconds for test payloads: a fixed base (docs/protocol.md's example time) so tests read clearly.
public let t0: Int64 = 1_764_450_000_000

/// A device on the test broker: publishes docs/protocol.md payloads under `things/<id>/thing/...` and can answer requests.
public final class SimulatedDevice: Sendable {
    public let id: String
    public let root: String
    public let client: MQTTClient

    public init(_ id: String, brokerURL: String, root: String = "things", will: Bool = false) throws {
        self.id = id
        self.root = root
        var configuration = MQTTConfiguration(url: brokerURL, clientID: "device-\(id)-\(UInt32.random(in: 0...UInt32.max))")
        if will {
            configuration.will = MQTTWill(topic: "\(root)/\(id)/thing/status",
                                          payload: Array(#"{"status":"offline"}"#.utf8), qos: .atLeastOnce, retain: true)
        }
        client = try MQTTClient(configuration: configuration)
    }

    /// A device over a client made elsewhere (credentials, TLS: `ShippedBroker.client`).
    public init(_ id: String, client: MQTTClient, root: String = "things") {
        self.id = id
        self.root = root
        self.client = client
    }

    public func connect() async throws {
        try await client.connect()
    }

    public func topic(_ suffix: String) -> String { "\(root)/\(id)/thing/\(suffix)" }

    /// Publishes raw text on `R/<id>/thing/<suffix>`.
    public func publish(_ suffix: String, _ payload: String, qos: QoS = .atLeastOnce, retain: Bool = false) async throws {
        try await client.publish(topic(suffix), payload: Array(payload.utf8), qos: qos, retain: retain)
    }

    public func status(_ online: Bool, time: Int64? = nil) async throws {
        let timeField = time.map { "\"time\":\($0)," } ?? ""
        try await publish("status", "{\(timeField)\"status\":\"\(online ? "online" : "offline")\"}", retain: true)
    }

    public func properties(_ json: String, time: Int64) async throws {
        try await publish("properties", "{\"msgId\":\"m\(time)\",\"time\":\(time),\"data\":\(json)}")
    }

    public func info(_ json: String, time: Int64) async throws {
        try await publish("info", "{\"msgId\":\"i\(time)\",\"time\":\(time),\"data\":\(json)}", retain: true)
    }

    public func signal(wifi: Int?, rsrp: Int? = nil, time: Int64) async throws {
        var fields = ["\"time\":\(time)"]
        if let wifi { fields.append("\"wifiSignal\":\(wifi)") }
        if let rsrp { fields.append("\"rsrp\":\(rsrp)") }
        try await publish("signal", "{\(fields.joined(separator: ","))}", qos: .atMostOnce)
    }

    /// Answers every request on `R/<id>/thing/<request>` with what `answer` returns for its payload
    /// (a JSON body without msgId, e.g. `"code":0,"data":{...}`), or not at all when it returns nil.
    public func answer(_ request: String, _ answer: @escaping @Sendable (String) -> String?) async throws -> Task<Void, Never> {
        let requestTopic = topic(request)
        let stream = client.messages
        try await client.subscribe(requestTopic, qos: .atLeastOnce)
        return Task { [client] in
            for await message in stream where message.topic == requestTopic {
                let text = String(decoding: message.payload, as: UTF8.self)
                guard let body = answer(text), let msgId = Self.msgId(in: text) else { continue }
                let reply = "{\"msgId\":\"\(msgId)\",\"time\":\(Int64(Date().timeIntervalSince1970 * 1000)),\(body)}"
                try? await client.publish(requestTopic + "_response", payload: Array(reply.utf8), qos: .atLeastOnce)
            }
        }
    }

    /// The msgId of a request payload (a small scan: tests do not need a JSON parser here).
    public static func msgId(in text: String) -> String? {
        guard let range = text.range(of: "\"msgId\":\"") else { return nil }
        let rest = text[range.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }

    public func disconnect() async {
        await client.disconnect()
    }
}
