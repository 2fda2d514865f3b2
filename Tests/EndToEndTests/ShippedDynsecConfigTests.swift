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
    /// The agent provisioning on the shipped broker as its plugin's admin, started (its task runs it).
    static func startAgent(_ broker: ShippedDynsecBroker, _ directory: String,
                           serviceUsers: [String] = []) async throws -> (Agent, Task<Void, any Error>) {
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = broker.loopbackURL
        configuration.mqtt.username = "thing-agent"
        configuration.mqtt.password = "agent-secret"
        configuration.mqtt.clientID = "thing-agent"
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.provisioning.enabled = true
        configuration.provisioning.serviceUsers = serviceUsers
        let agent = try Agent(configuration: configuration)
        let started = Atomic<Bool>(false)
        let running = Task { try await agent.run(onStarted: { started.store(true, ordering: .relaxed) }) }
        // Long: under two suites at once the start (the broker roles first) took over 30 s (`runUntilSubscribed`).
        try await waitUntil(timeout: .seconds(90)) { started.load(ordering: .relaxed) || running.isCancelled }
        return (agent, running)
    }

    @Test(.timeLimit(.minutes(2)))
    func aDevicePairsAndIsHeldToItsOwnTopicsOnTheShippedBroker() async throws {
        let broker = try await ShippedDynsecBroker(admin: "thing-agent", password: "agent-secret")
        defer { broker.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (agent, running) = try await Self.startAgent(broker, directory)
        defer { running.cancel() }

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

    /// The roles the agent gives the operators' CLI and a service at start, in the shipped broker: the CLI may call
    /// every API method and follows the event feed, the service calls only the methods that read (`ShippedBrokerConfigTests.readMethods`, as the static
    /// ACL's example service).
    @Test(.timeLimit(.minutes(2)))
    func theCLIMayCallEveryAPIMethodAndFollowTheFeedAndAServiceOnlyTheReads() async throws {
        let broker = try await ShippedDynsecBroker(admin: "thing-agent", password: "agent-secret")
        defer { broker.stop() }
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The operator makes the two clients; the agent gives them their roles.
        for (user, password) in [("thing-agent-cli", "cli-secret"), ("svc-dashboard", "svc-secret")] {
            let made = try await runCommand("/usr/bin/mosquitto_ctrl", [
                "-h", "127.0.0.1", "-p", "\(broker.loopbackPort)", "-u", "thing-agent", "-P", "agent-secret",
                "dynsec", "createClient", user, "-p", password,
            ])
            #expect(made.status == 0, "\(made.stdout) \(made.stderr)")
        }
        let (_, running) = try await Self.startAgent(broker, directory, serviceUsers: ["svc-dashboard"])
        // The roles stay at the broker; the agent is stopped so that it answers none of the probes.
        running.cancel()
        _ = try? await running.value

        let witness = try await BrokerProbe.connect(try broker.client("thing-agent", password: "agent-secret",
                                                                      clientID: "witness"),
                                                    subscribing: ["thing-agent/#"])
        let api = "thing-agent/api/thing-agent/request/"
        let cli = try broker.client("thing-agent-cli", password: "cli-secret")
        try await cli.connect()
        try await expectAccess(cli, allowed: Agent.apiMethods.map { api + $0 }, denied: [],
                               reaching: witness, marker: api + "info")
        await cli.disconnect()
        // transfer follows the daemon's event feed: the CLI reads it, fed by the agent's user.
        let follower = try await BrokerProbe.connect(try broker.client("thing-agent-cli", password: "cli-secret"),
                                                     subscribing: ["thing-agent/events/#", "thing-agent/agents/+/status"])
        let feeder = try broker.client("thing-agent", password: "agent-secret", clientID: "feeder")
        try await feeder.connect()
        try await expectAccess(feeder, allowed: ["thing-agent/events/gw1/transfer"], denied: [],
                               reaching: follower, marker: "thing-agent/agents/thing-agent/status")
        await feeder.disconnect()
        await follower.disconnect()
        let service = try broker.client("svc-dashboard", password: "svc-secret")
        try await service.connect()
        let reads = ShippedBrokerConfigTests.readMethods
        try await expectAccess(service, allowed: reads.map { api + $0 },
                               denied: Agent.apiMethods.filter { !reads.contains($0) }.map { api + $0 },
                               reaching: witness, marker: api + "info")
        await service.disconnect()
        await witness.disconnect()
    }
}
