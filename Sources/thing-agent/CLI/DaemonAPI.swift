import JSON
import MQTT
import ThingAgent

/// The daemon's API over MQTT, as the CLI uses it to send its writes to the daemon that holds the cache (README:
/// "The API over MQTT"). One request per call: connect, subscribe to a reply topic of its own, ask, wait, leave.
struct DaemonAPI {
    let configuration: AgentConfiguration
    /// The daemon's client id (its API lives under `thing-agent/api/<clientId>/`).
    let daemon: String

    /// What the daemon answered with a non-zero code.
    struct Refusal: Error {
        let code: Int
        let message: String
    }

    /// Sends `request` to `method` and returns the answer's `data`, or throws `Refusal` or a `CommandFailure`
    /// (no broker, no answer within `requestTimeout`).
    func call(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        let clientID = configuration.commandClientID
        // Under the user's own name, as the shipped ACL lets every user read thing-agent/replies/<user>/#.
        let replyTo = "\(configuration.replyPrefix)\(configuration.username ?? "thing-agent-cli")/\(clientID)"
        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: configuration.mqtt(clientID: clientID))
            try await client.connect()
        } catch {
            throw CommandFailure(code: .noBroker, message: """
                the daemon \(daemon) holds the cache \(configuration.database), so the change goes through it, \
                but the broker \(configuration.broker) cannot be used: \(error)
                """)
        }
        let answers = client.messages
        let id = "cli-\(UInt32.random(in: 0...UInt32.max))"
        var payload = request
        payload["id"] = .string(id)
        payload["replyTo"] = .string(replyTo)
        let timeout = configuration.requestTimeout
        let answer: JSONValue?
        do {
            try await client.subscribe(replyTo, qos: .atLeastOnce)
            try await client.publish("thing-agent/api/\(daemon)/request/\(method)",
                                     payload: JSONValue.object(payload).serializedBytes(), qos: .atLeastOnce,
                                     responseTopic: replyTo)
            answer = try await Self.first(in: answers, id: id, timeout: timeout) { await client.disconnect() }
        } catch {
            await client.disconnect()
            throw CommandFailure(code: .noBroker, message: "cannot reach the daemon \(daemon): \(error)")
        }
        await client.disconnect()
        guard let answer else {
            throw CommandFailure(code: .timeout, message: """
                the daemon \(daemon) holds the cache \(configuration.database) but did not answer within \
                \(Format.seconds(configuration.requestTimeout.seconds)) s
                """)
        }
        let code = Int(answer["code"]?.int64Value ?? -1)
        guard code == 0 else {
            throw Refusal(code: code, message: answer["message"]?.stringValue ?? "refused with code \(code)")
        }
        return answer["data"] ?? .null
    }

    /// The first answer with `id`, or nil when `timeout` passed first (then `expire` ends the stream).
    private static func first(in answers: AsyncStream<MQTTMessage>, id: String, timeout: Duration,
                              expire: @escaping @Sendable () async -> Void) async throws -> JSONValue? {
        await withTimeout(timeout) {
            for await message in answers {
                guard let answer = try? JSONParser.parse(message.payload), answer["id"]?.stringValue == id else {
                    continue
                }
                return answer
            }
            return nil
        } expire: {
            await expire()
        }
    }
}
