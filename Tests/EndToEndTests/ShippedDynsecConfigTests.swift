import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
import ThingAgent

/// deploy/mosquitto-dynsec.conf in the real mosquitto, its plugin file initialised as its comment says, with the
/// agent provisioning on it: a device pairs over TLS, reports with its own credentials, is denied another device's
/// topics, and its credentials work only with its own client id.
@Suite("the shipped dynamic-security configuration", .serialized)
struct ShippedDynsecConfigTests {
    @Test(.timeLimit(.minutes(2)))
    func aDevicePairsAndIsHeldToItsOwnTopicsOnTheShippedBroker() async throws {
        let broker = try await ShippedDynsecBroker(admin: "thing-agent", password: "agent-secret")
        defer { broker.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentConfiguration()
        configuration.broker = broker.loopbackURL
        configuration.username = "thing-agent"
        configuration.password = "agent-secret"
        configuration.clientID = "thing-agent"
        configuration.database = directory + "/cache.sqlite"
        configuration.provisioning = true
        let agent = try Agent(configuration: configuration)
        let started = Atomic<Bool>(false)
        let running = Task { try await agent.run(onStarted: { started.store(true, ordering: .relaxed) }) }
        defer { running.cancel() }
        try await waitUntil(timeout: .seconds(30)) { started.load(ordering: .relaxed) || running.isCancelled }

        let session = try await agent.pair(productId: "p-plug-1")
        let pairing = session.made.pairing.username
        let bootstrap = try broker.client(pairing, password: session.made.password)
        let answers = bootstrap.messages
        try await bootstrap.connect()
        try await bootstrap.subscribe("things/\(pairing)/thing/activate_response", qos: .atLeastOnce)
        let request = JSONObject([("msgId", "p1"), ("time", .integer(1_764_450_000_000)), ("data", .object([
            "token": .string(session.made.token), "devId": "plug-7", "productId": "p-plug-1"]))])
        try await bootstrap.publish("things/\(pairing)/thing/activate", payload: JSONValue.object(request).serializedBytes(),
                                    qos: .atLeastOnce)
        var answer: JSONValue?
        for await message in answers {
            answer = try JSONParser.parse(message.payload)
            break
        }
        #expect(answer?["code"] == 0)
        let password = try #require(answer?["data"]?["password"]?.stringValue)
        await bootstrap.disconnect()

        let device = try broker.client("plug-7", password: password)
        try await device.connect()
        func report(_ id: String, _ code: String) async throws {
            let payload = JSONObject([("time", .integer(1_764_450_000_000)), ("data", .object([code: true]))])
            try? await device.publish("things/\(id)/thing/properties", payload: JSONValue.object(payload).serializedBytes(),
                                      qos: .atLeastOnce)
        }
        // A report for another device, then its own: the broker handles them in order, so once the second is
        // cached the first would be too, had it been allowed.
        try await report("plug-8", "foreign")
        try await report("plug-7", "own")
        try await waitUntil(timeout: .seconds(20)) {
            agent.cache.device("plug-7")?.properties["own"] != nil || device.state != .connected
        }
        #expect(agent.cache.device("plug-8") == nil)
        await device.disconnect()

        let impostor = try broker.client("plug-7", password: password, clientID: "thing-agent-cli-1")
        await #expect(throws: MQTTError.self) { try await impostor.connect() }
        await impostor.disconnect()
        running.cancel()
        _ = try? await running.value
    }
}
