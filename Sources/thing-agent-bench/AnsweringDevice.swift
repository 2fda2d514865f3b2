import Foundation
import JSON
import MQTT

/// A device that answers every property set with code 0, as docs/protocol.md has it answer.
final class AnsweringDevice: Sendable {
    let id: String
    private let client: MQTTClient
    private let answering: Task<Void, Never>

    init(_ id: String, brokerURL: String) async throws {
        self.id = id
        client = try MQTTClient(configuration: MQTTConfiguration(
            url: brokerURL, clientID: "bench-device-\(id)-\(UInt32.random(in: 0...UInt32.max))"))
        try await client.connect()
        let requests = "things/\(id)/thing/properties/set"
        let stream = client.messages
        try await client.subscribe(requests, qos: .atLeastOnce)
        answering = Task { [client] in
            for await message in stream where message.topic == requests {
                guard let msgId = (try? JSONParser.parse(message.payload))?["msgId"] else { continue }
                let answer = JSONValue.object(JSONObject([
                    ("msgId", msgId), ("time", .integer(Int64(Date().timeIntervalSince1970 * 1000))), ("code", 0),
                ]))
                try? await client.publish(requests + "_response", payload: answer.serializedBytes(), qos: .atLeastOnce)
            }
        }
    }

    func stop() async {
        answering.cancel()
        await client.disconnect()
    }
}
