import JSON
import MQTT

/// One request to a daemon's API over MQTT with a client of the test's own, and its answer (the whole answer
/// object: `id`, `method`, `code`, `data` or `message`).
public func askAPI(_ brokerURL: String, daemon clientID: String, _ method: String,
                   _ request: JSONObject) async throws -> JSONValue {
    let client = try MQTTClient(configuration: MQTTConfiguration(
        url: brokerURL, clientID: "svc-\(UInt32.random(in: 0...UInt32.max))"))
    try await client.connect()
    let replies = client.messages
    let replyTo = "thing-agent/replies/test/\(UInt32.random(in: 0...UInt32.max))"
    try await client.subscribe(replyTo, qos: .atLeastOnce)
    var payload = request
    payload["replyTo"] = .string(replyTo)
    try await client.publish("thing-agent/api/\(clientID)/request/\(method)",
                             payload: JSONValue.object(payload).serializedBytes(), qos: .atLeastOnce)
    var answer: JSONValue?
    for await message in replies {
        answer = try JSONParser.parse(message.payload)
        break
    }
    await client.disconnect()
    guard let answer else { throw TestSupportError("no answer to the API request \(method)") }
    return answer
}
