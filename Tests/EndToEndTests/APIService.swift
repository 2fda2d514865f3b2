import Foundation
import JSON
import MQTT
import Synchronization
import TestSupport

/// An outside service using the agent's API with a client of its own, as README's "The API over MQTT" shows:
/// requests on `thing-agent/api/<agent>/request/<method>`, answers under `thing-agent/replies/<name>/`.
final class APIService: Sendable {
    let client: MQTTClient
    let name: String
    let requests: String
    /// Everything heard on the subscriptions, in order.
    private let heard = Mutex<[MQTTMessage]>([])

    /// Connects (MQTT 5, so that a response topic can be given) and subscribes to its replies and to `watching`.
    init(_ harness: AgentHarness, name: String, watching: [String] = []) async throws {
        self.name = name
        requests = "thing-agent/api/\(harness.clientID)/request"
        var configuration = MQTTConfiguration(url: harness.broker.url,
                                              clientID: "\(name)-\(UInt32.random(in: 0...UInt32.max))")
        configuration.protocolVersion = .v5
        client = try MQTTClient(configuration: configuration)
        let stream = client.messages
        Task { [weak self] in
            for await message in stream { self?.heard.withLock { $0.append(message) } }
        }
        try await client.connect()
        try await client.subscribe([("thing-agent/replies/\(name)/#", .atLeastOnce)] + watching.map { ($0, .atLeastOnce) })
    }

    var messages: [MQTTMessage] { heard.withLock { $0 } }

    /// The reply topic for `id` under this service's own level of the reply prefix.
    func replyTopic(_ id: String) -> String { "thing-agent/replies/\(name)/\(id)" }

    /// Publishes a request with `payload` as it is; the answer goes to `responseTopic` (MQTT 5) when given.
    func send(_ method: String, _ payload: String, responseTopic: String? = nil, retain: Bool = false) async throws {
        try await client.publish("\(requests)/\(method)", payload: Array(payload.utf8), qos: .atLeastOnce,
                                 retain: retain, responseTopic: responseTopic)
    }

    /// Sends `body` (a JSON object's members, without `id`) with `"id"` and a `replyTo` of its own, and waits for
    /// the answer.
    func call(_ method: String, id: String, _ body: String = "", timeout: Duration = .seconds(20)) async throws
        -> JSONObject {
        let members = [#""id":"\#(id)""#, #""replyTo":"\#(replyTopic(id))""#] + (body.isEmpty ? [] : [body])
        try await send(method, "{" + members.joined(separator: ",") + "}")
        return try await answer(on: replyTopic(id), timeout: timeout)
    }

    /// Waits for the first answer on `topic`.
    func answer(on topic: String, count: Int = 1, timeout: Duration = .seconds(20)) async throws -> JSONObject {
        try await waitUntil(timeout: timeout) { self.messages.filter { $0.topic == topic }.count >= count }
        let message = messages.filter { $0.topic == topic }[count - 1]
        guard let object = try JSONParser.parse(message.payload).objectValue else {
            throw TestSupportError("an answer that is not a JSON object on \(topic)")
        }
        return object
    }

    func disconnect() async {
        await client.disconnect()
    }
}
