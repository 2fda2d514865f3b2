import Foundation
import JSON
import MQTT
import Synchronization
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// A broker with the dynamic-security plugin (its admin the agent's user) and a provisioning agent on a fresh
/// cache file.
struct ProvisionedFleet {
    static let agentUser = "thing-agent"
    static let agentPassword = "agent-secret"
    let broker: MosquittoBroker
    let directory: String

    static func start() async throws -> ProvisionedFleet {
        var options = MosquittoBroker.Options()
        options.dynamicSecurity = (agentUser, agentPassword)
        return ProvisionedFleet(broker: try await MosquittoBroker.start(options), directory: try makeTemporaryDirectory())
    }

    var configuration: AgentConfiguration {
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = broker.url
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.mqtt.clientID = "prov-\(UInt32.random(in: 0...UInt32.max))"
        configuration.mqtt.username = Self.agentUser
        configuration.mqtt.password = Self.agentPassword
        configuration.provisioning.enabled = true
        configuration.requestTimeout = .seconds(10)
        return configuration
    }

    func stop() {
        broker.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` with a started provisioning agent, stopping it afterwards.
@discardableResult
func withProvisioningAgent<T: Sendable>(_ configuration: AgentConfiguration, logger: AgentLogger = .disabled,
                                        _ body: (Agent) async throws -> T) async throws -> T {
    try await Agent(configuration: configuration, logger: logger).whileRunning(body)
}

/// A device (or gateway) speaking to the broker with some credentials: it records what it receives, and its
/// reconnect delay is long so that a connection the broker drops stays dropped for the test to see.
final class DeviceConnection: Sendable {
    let client: MQTTClient
    private let received = Mutex<[MQTTMessage]>([])

    init(_ broker: MosquittoBroker, user: String, password: String) throws {
        var configuration = MQTTConfiguration(url: broker.url, clientID: user)
        configuration.username = user
        configuration.password = password
        configuration.reconnectMinDelay = .seconds(60)
        configuration.reconnectMaxDelay = .seconds(60)
        client = try MQTTClient(configuration: configuration)
        let stream = client.messages
        Task { [weak self] in
            for await message in stream { self?.received.withLock { $0.append(message) } }
        }
    }

    static func connect(_ broker: MosquittoBroker, user: String, password: String) async throws -> DeviceConnection {
        let device = try DeviceConnection(broker, user: user, password: password)
        try await device.client.connect()
        return device
    }

    var messages: [MQTTMessage] { received.withLock { $0 } }

    /// Publishes an activation on `pairing`'s topic and returns the agent's answer.
    func activate(pairing: String, token: String, data: JSONObject = [:], root: String = "things") async throws -> JSONValue {
        let answerTopic = "\(root)/\(pairing)/thing/activate_response"
        if !messages.contains(where: { $0.topic == answerTopic }) {
            try await client.subscribe(answerTopic, qos: .atLeastOnce)
        }
        let before = messages.filter { $0.topic == answerTopic }.count
        var fields = data
        fields["token"] = .string(token)
        let msgId = "p\(UInt16.random(in: 0...UInt16.max))"
        let request = JSONObject([("msgId", .string(msgId)), ("time", .integer(Timestamp.now())), ("data", .object(fields))])
        try await client.publish("\(root)/\(pairing)/thing/activate", payload: JSONValue.object(request).serializedBytes(),
                                 qos: .atLeastOnce)
        try await waitUntil(timeout: .seconds(20)) { self.messages.filter { $0.topic == answerTopic }.count > before }
        let answer = try JSONParser.parse(messages.filter { $0.topic == answerTopic }[before].payload)
        guard answer["msgId"]?.stringValue == msgId else { throw TestSupportError("answer to another request: \(answer)") }
        return answer
    }

    /// Publishes a property report for `device` (itself or a sub-device).
    func report(_ device: String, _ values: JSONObject, root: String = "things") async throws {
        let payload = JSONObject([("time", .integer(Timestamp.now())), ("data", .object(values))])
        try await client.publish("\(root)/\(device)/thing/properties", payload: JSONValue.object(payload).serializedBytes(),
                                 qos: .atLeastOnce)
    }

    /// Answers the next `request` the agent sends to `device` (`things/<device>/thing/<request>`) with code 0, from
    /// the task returned; subscribed before this returns, so a request sent afterwards is not missed.
    func acceptNext(_ request: String, to device: String) async throws -> Task<Void, any Error> {
        let topic = "things/\(device)/thing/\(request)"
        try await client.subscribe(topic, qos: .atLeastOnce)
        return Task {
            try await waitUntil(timeout: .seconds(20)) { self.messages.contains { $0.topic == topic } }
            guard let request = self.messages.first(where: { $0.topic == topic }) else {
                throw TestSupportError("no \(topic) came")
            }
            let asked = try JSONParser.parse(request.payload)
            let answer = JSONObject([("msgId", asked["msgId"] ?? .null), ("time", .integer(Timestamp.now())),
                                     ("code", .integer(0))])
            try await self.client.publish(topic + "_response", payload: JSONValue.object(answer).serializedBytes(),
                                     qos: .atLeastOnce)
        }
    }

    /// Publishes a report for `foreign`, then one for `own` (which its role allows), and checks that the agent got
    /// the second and not the first: the broker handles one connection's publishes in order and delivers them to
    /// the agent in order. A broker that drops the connection for the denied publish denies it too.
    func expectDenied(_ foreign: String, own: String, agent: Agent) async throws {
        try? await report(foreign, ["denied_probe": true])
        let marker = Int64.random(in: 1...1_000_000_000)
        try? await report(own, ["marker": .integer(marker)])
        try await waitUntil(timeout: .seconds(20)) {
            self.client.state != .connected || agent.cache.device(own)?.properties["marker"]?.value == .integer(marker)
        }
        guard agent.cache.device(foreign)?.properties["denied_probe"] == nil else {
            throw TestSupportError("the broker let \(client.configuration.username ?? "") publish for \(foreign)")
        }
    }

    func stop() async {
        await client.disconnect()
    }
}

/// Whether `user` can connect with `password` now.
func canConnect(_ broker: MosquittoBroker, user: String, password: String, clientID: String? = nil) async throws -> Bool {
    // By default the client id the credentials are pinned to: any other is refused whether or not they still exist.
    var configuration = MQTTConfiguration(url: broker.url, clientID: clientID ?? user)
    configuration.username = user
    configuration.password = password
    let client = try MQTTClient(configuration: configuration)
    do {
        try await client.connect()
        await client.disconnect()
        return true
    } catch let error where error.kind == .notAuthorized {
        await client.disconnect()
        return false
    } catch {
        await client.disconnect()
        throw error
    }
}

extension Agent {
    /// Makes a pairing and activates `device` with it, connected with the bootstrap credentials; returns the
    /// device's own credentials.
    func pairAndActivate(_ broker: MosquittoBroker, device: String, info: JSONObject = [:],
                         spaceId: Int64? = nil) async throws -> (user: String, password: String) {
        let session = try await pair(spaceId: spaceId)
        let bootstrap = try await DeviceConnection.connect(broker, user: session.made.pairing.username,
                                                           password: session.made.password)
        var data = info
        data["devId"] = .string(device)
        let answer = try await bootstrap.activate(pairing: session.made.pairing.username, token: session.made.token, data: data)
        await bootstrap.stop()
        guard answer["code"]?.int64Value == 0, let user = answer["data"]?["username"]?.stringValue,
              let password = answer["data"]?["password"]?.stringValue else {
            throw TestSupportError("activation of \(device) refused: \(answer)")
        }
        return (user, password)
    }
}

extension ProvisionedFleet {
    /// Commands to the plugin as its admin, on a connection of their own.
    func dynsec(_ commands: [DynsecCommand]) async throws -> [DynsecAnswer] {
        var admin = MQTTConfiguration(url: broker.url, clientID: "test-admin-\(UInt16.random(in: 0...UInt16.max))")
        admin.username = Self.agentUser
        admin.password = Self.agentPassword
        let dynsec = try DynsecClient(configuration: admin, timeout: .seconds(10))
        try await dynsec.connect()
        let answers = try await dynsec.run(commands)
        await dynsec.disconnect()
        return answers
    }

    /// A client made by hand at the broker (as an operator would with mosquitto_ctrl) that may publish any
    /// activation and read any answer: it reaches the agent with tokens whose own bootstrap credentials are gone.
    func tester() async throws -> DeviceConnection {
        let answers = try await dynsec([
            .createRole("tester"), .addRoleACL("tester", .send("things/+/thing/activate")),
            .addRoleACL("tester", .subscribe("things/+/thing/activate_response")),
            .createClient(username: "tester", password: "tester-secret", clientID: nil, roles: ["tester"]),
        ])
        guard answers.allSatisfy(\.succeeded) else { throw TestSupportError("could not make the tester: \(answers)") }
        return try await DeviceConnection.connect(broker, user: "tester", password: "tester-secret")
    }
}
