import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `AgentClient` against a daemon's answers it cannot trust: whoever may publish on the client's reply topic can
/// send any numbers. A plain MQTT client on the real broker answers the API requests here.
@Suite("AgentClient: malformed daemon answers", .serialized)
struct AgentClientAnswerTests {
    @Test("a transfer answer's stallTimeout beyond any duration is an error, not a trap", .timeLimit(.minutes(1)))
    func hugeStallTimeoutIsRefused() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let configuration = agentConfiguration(broker, directory: directory)
            let stallTimeout = Mutex<JSONValue>(.integer(120))
            let daemon = try await Self.fakeDaemon(configuration) { stallTimeout.withLock { $0 } }
            let client = try AgentClient(configuration: configuration)
            try await client.connect()

            let sound = try await client.transfer(gateway: "new", fromGateway: "old")
            #expect(sound.stallTimeout == .seconds(120), "the fake daemon's answer is read")

            for huge: JSONValue in [.double(1e300), .double(-1e300), .integer(Int64.max)] {
                stallTimeout.withLock { $0 = huge }
                await #expect {
                    _ = try await client.transfer(gateway: "new", fromGateway: "old")
                } throws: { error in
                    guard case AgentClientError.refused(500, let message, nil) = error else { return false }
                    return message.contains("stallTimeout")
                }
            }
            await client.disconnect()
            await daemon.disconnect()
        }
    }

    /// Answers every `transfer` request to `configuration.clientID` with an accepted start whose stallTimeout is
    /// `stallTimeout()`.
    private static func fakeDaemon(_ configuration: AgentConfiguration,
                                   stallTimeout: @escaping @Sendable () -> JSONValue) async throws -> MQTTClient {
        let requests = "thing-agent/api/\(configuration.mqtt.clientID)/request/transfer"
        let daemon = try MQTTClient(configuration: configuration.mqtt.connection(clientID: "fake-\(configuration.mqtt.clientID)"))
        try await daemon.connect()
        try await daemon.subscribe(requests, qos: .atLeastOnce)
        Task { [messages = daemon.messages] in
            for await message in messages where message.topic == requests {
                guard let request = try? JSONParser.parse(message.payload), let id = request["id"]?.stringValue,
                      let replyTo = request["replyTo"]?.stringValue else { continue }
                let transfer: JSONValue = .object(JSONObject([
                    ("sourceDeviceId", .string("old")), ("targetDeviceId", .string("new")),
                    ("status", .integer(0)), ("updatedAt", .integer(1)),
                ]))
                let answer: JSONValue = .object(JSONObject([
                    ("id", .string(id)), ("code", .integer(0)),
                    ("data", .object(JSONObject([
                        ("transfer", transfer), ("moving", .array([])), ("stallTimeout", stallTimeout()),
                    ]))),
                ]))
                try? await daemon.publish(replyTo, payload: answer.serializedBytes(), qos: .atLeastOnce)
            }
        }
        return daemon
    }
}
