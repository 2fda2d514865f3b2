import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent
@testable import thing_agent

/// `thing-agent simulate --dialect alink` against the real daemon on a real broker: the simulated Linkkit devices
/// (a light, a gateway and its sub-devices) are cached, answer sets, services and upgrades through the daemon, and,
/// with provisioning on the dynamic-security plugin, pair as Alink devices and are held to their own topics.
@Suite("Alink: the simulated fleet and the daemon", .serialized)
struct AlinkSimulatorTests {
    /// The daemon speaks both dialects and checks sets against the shipped models (the Alink products' TSL files).
    static let environment = ["THING_AGENT_DIALECTS": "native,alink", "THING_AGENT_MODELS": shippedModelsDirectory()]

    /// The plans of `simulate` with these counts and seed (the ids the fleet will have).
    static func plans(devices: Int, gateways: Int, subdevices: Int, seed: UInt64,
                      dialects: [SimulatedDialect]) -> [DevicePlan] {
        var options = SimulatorOptions()
        options.devices = devices
        options.gateways = gateways
        options.subdevicesPerGateway = subdevices
        options.seed = seed
        options.dialects = dialects
        return FleetPlan.make(options)
    }

    static func devices(_ harness: AgentHarness) async throws -> [JSONValue] {
        let listed = try await harness.cli(["devices", "--json"])
        return (try? JSONParser.parse(listed.stdout).arrayValue) ?? []
    }

    /// Waits until every device of `ids` is listed online with properties; returns the listing.
    static func waitForFleet(_ harness: AgentHarness, _ ids: [String], simulator: DaemonProcess) async throws
        -> [String: JSONValue] {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            let listed = try await Self.devices(harness)
            let fleet = Dictionary(listed.compactMap { entry in entry["devId"]?.stringValue.map { ($0, entry) } }) { $1 }
            let up = ids.allSatisfy { id in
                fleet[id]?["online"] == true && fleet[id]?["properties"]?.objectValue?.isEmpty == false
            }
            if up { return fleet }
            guard ContinuousClock.now < deadline, simulator.isRunning else {
                throw TestSupportError("the fleet did not come up: \(fleet.keys.sorted())\n\(simulator.log)")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aSimulatedAlinkFleetIsCachedAndAnswersSetsServicesAndUpgrades() async throws {
        var options = MosquittoBroker.Options()
        // The broker's client events: how the daemon learns that a device which announces no status has left.
        options.extraConfig = "log_dest topic\n"
        try await withBroker(options) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.environment)
            try await harness.startDaemon()
            let plans = Self.plans(devices: 2, gateways: 2, subdevices: 2, seed: 5, dialects: [.native, .alink])
            let simulator = try DaemonProcess(thingAgentExecutable(), [
                "simulate", "--dialect", "native,alink", "--devices", "2", "--gateways", "2", "--subdevices", "2",
                "--seed", "5", "--ota-step", "0.2", "--report-interval", "1", "--broker", broker.url,
            ], logPath: harness.directory + "/simulate.out")
            defer { simulator.signal(SIGKILL) }
            let fleet = try await Self.waitForFleet(harness, plans.map(\.id), simulator: simulator)

            // The second half of each kind speaks Alink: ids <productKey>.<name>, the product key their product.
            let alink = plans.filter { $0.dialect == .alink }
            #expect(alink.map(\.category) == [.gateway, .subdevice, .subdevice, .device], "\(plans.map(\.id))")
            let light = try #require(alink.first { $0.category == .device }).id
            let gateway = try #require(alink.first { $0.category == .gateway }).id
            let sub = try #require(alink.first { $0.category == .subdevice }).id
            #expect(light.hasPrefix("a1Light1.dev-") && gateway.hasPrefix("a1Gateway1.gw-") && sub.hasPrefix("a1Sensor1.sub-"))
            for plan in alink {
                #expect(fleet[plan.id]?["productId"]?.stringValue == plan.productId, "\(fleet[plan.id] ?? .null)")
            }
            // The gateway added its sub-devices and logged them in: they are linked to it.
            for plan in alink where plan.category == .subdevice {
                #expect(fleet[plan.id]?["gatewayId"]?.stringValue == gateway, "\(fleet[plan.id] ?? .null)")
            }
            // Booleans and enums as Alink numbers.
            let switched = try #require(fleet[light]?["properties"]?["switch_1"])
            #expect(switched == 0 || switched == 1, "\(switched)")

            // A set: the TSL model refuses what is out of range before anything is sent; the device answers 200
            // and then posts the value it applied.
            let refused = try await harness.cli(["set", light, "bright_value=5000"])
            #expect(refused.status == 3, "\(refused.stdout) \(refused.stderr)")
            let set = try await harness.cli(["set", light, "bright_value=420", "switch_1=1"])
            #expect(set.status == 0 && set.stdout.contains("applied"), "\(set.stdout) \(set.stderr)")
            _ = try await harness.waitForInfo(light) {
                $0["properties"]?["bright_value"] == 420 && $0["properties"]?["switch_1"] == 1
            }
            // A sub-device's set goes through its gateway's connection.
            let subSet = try await harness.cli(["set", sub, "report_period=120"])
            #expect(subSet.status == 0, "\(subSet.stdout) \(subSet.stderr)")
            _ = try await harness.waitForInfo(sub) { $0["properties"]?["report_period"] == 120 }

            // A service is an action, answered on identify_reply with its output.
            let action = try await harness.cli(["action", light, "identify", "times=4"])
            #expect(action.status == 0 && action.stdout.contains("blinked = 4"), "\(action.stdout) \(action.stderr)")
            let subAction = try await harness.cli(["action", sub, "identify"])
            #expect(subAction.status == 0 && subAction.stdout.contains("blinked = 3"), "\(subAction.stdout) \(subAction.stderr)")

            // An upgrade: the push, the device's progress, then its new version ends it.
            let sha256 = String(repeating: "ab", count: 32)
            for device in [light, sub] {
                let ota = try await harness.cli([
                    "ota", device, "--version", "9.0.0", "--url", "http://fw.example/fw-9.0.0.bin", "--sha256", sha256,
                    "--size", "4096", "--timeout", "30",
                ], timeout: .seconds(45))
                #expect(ota.status == 0, "\(ota.stdout) \(ota.stderr)\n\(simulator.log)")
                let info = try #require(try await harness.info(device))
                #expect(info["firmwareVersion"] == "9.0.0" && info["upgrade"]?["stage"] == "succeeded", "\(info)")
            }

            // Everything the simulated devices sent (posts, events, NTP requests, topology, sessions, progress) was
            // read: nothing was dropped.
            let stats = try await harness.stats()
            let dropped = stats["dropped"]?.objectValue ?? [:]
            #expect(dropped.allSatisfy { $0.value.int64Value == 0 }, "\(stats)")

            // The fleet stops: the gateway logs its sub-devices out, and the broker says the light has left (it
            // publishes no status of its own).
            simulator.signal(SIGTERM)
            #expect(await simulator.waitForExit(timeout: .seconds(30)) == 0, "\(simulator.log)")
            _ = try await harness.waitForInfo(sub) { $0["online"] == false }
            _ = try await harness.waitForInfo(light) { $0["online"] == false }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func simulateAndPairSayTheirDialectAndAnUnknownOneIsAUsageError() async throws {
        for command in ["simulate", "pair"] {
            let help = try await runCommand(thingAgentExecutable(), [command, "--help"])
            #expect(help.status == 0 && help.stdout.contains("--dialect"), "\(help.stdout)")
        }
        for flags in [["--dialect", "zigbee"], ["--dialect", "alink,alink"], ["--dialect", ""],
                      ["--dialects", "native,alink"]] {
            let bad = try await runCommand(thingAgentExecutable(), [
                "simulate", "--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())"] + flags)
            #expect(bad.status == 2 && bad.stderr.contains("--dialect"), "\(flags): \(bad.stderr)")
        }
    }

    static let agentPassword = "agent-secret"
    static let cliPassword = "cli-secret"

    @Test(.timeLimit(.minutes(3)))
    func simulatedAlinkDevicesPairAsAlinkDevicesAndAreHeldToTheirOwnTopics() async throws {
        var options = MosquittoBroker.Options()
        options.dynamicSecurity = ("thing-agent", Self.agentPassword)
        try await withBroker(options) { broker in
            try await PairCommandTests.ctrl(broker, ["createClient", "thing-agent-cli", "-p", Self.cliPassword])
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.environment.merging([
                "THING_AGENT_PROVISIONING": "true", "THING_AGENT_USERNAME": "thing-agent",
                "THING_AGENT_PASSWORD": Self.agentPassword,
            ]) { $1 })
            try await harness.startDaemon()
            let cliUser = ["--username", "thing-agent-cli", "--password", Self.cliPassword]
            let kept = harness.directory + "/credentials.json"
            let plans = Self.plans(devices: 2, gateways: 1, subdevices: 2, seed: 9, dialects: [.alink])
            let simulator = try DaemonProcess(thingAgentExecutable(), [
                "simulate", "--provision", "--credentials", kept, "--dialect", "alink", "--devices", "2",
                "--gateways", "1", "--subdevices", "2", "--seed", "9", "--report-interval", "1",
                "--broker", broker.url, "--client-id", harness.clientID,
            ] + cliUser, logPath: harness.directory + "/simulate.out")
            defer { simulator.signal(SIGKILL) }
            // Each pairs for Alink, activates, and speaks Alink under the access its activation gave it.
            _ = try await Self.waitForFleet(harness, plans.map(\.id), simulator: simulator)
            let pairings = try JSONParser.parse(try await harness.cli(["pair", "list", "--json"]).stdout).arrayValue ?? []
            #expect(pairings.count == 5)
            #expect(pairings.allSatisfy { $0["state"] == "used" && $0["dialect"] == "alink" }, "\(pairings)")

            let lights = plans.filter { $0.category == .device }.map(\.id)
            let sub = try #require(plans.first { $0.category == .subdevice }).id
            // Its role lets each read its sets and answer them (a sub-device's through its gateway).
            for device in [lights[0], sub] {
                let code = device == sub ? "report_period=60" : "bright_value=300"
                let set = try await harness.cli(["set", device, code] + cliUser)
                #expect(set.status == 0, "\(set.stdout) \(set.stderr)")
            }
            _ = try await harness.waitForInfo(lights[0]) { $0["properties"]?["bright_value"] == 300 }

            // The first light's own credentials: Linkkit's user name and the client id they are pinned to.
            let keptFile = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: kept))))
            let credentials = try #require(keptFile[lights[0]]?.objectValue)
            let (pk, dn) = try #require(AlinkDialect.split(lights[0]))
            #expect(credentials["username"]?.stringValue == "\(dn)&\(pk)")
            #expect(credentials["clientId"]?.stringValue == "\(pk)&\(dn)|securemode=-2,authType=connwl|")
            simulator.signal(SIGTERM)
            #expect(await simulator.waitForExit(timeout: .seconds(30)) == 0, "\(simulator.log)")

            func client(_ clientID: String) throws -> MQTTClient {
                var configuration = MQTTConfiguration(url: broker.url, clientID: clientID)
                configuration.username = credentials["username"]?.stringValue
                configuration.password = credentials["password"]?.stringValue
                configuration.protocolVersion = .v5
                configuration.reconnectMinDelay = .seconds(60)
                configuration.reconnectMaxDelay = .seconds(60)
                return try MQTTClient(configuration: configuration)
            }
            // Only with the client id they are pinned to.
            let impostor = try client("someone-else")
            await #expect(throws: MQTTError.self) { try await impostor.connect() }
            await impostor.disconnect()
            let device = try client(try #require(credentials["clientId"]?.stringValue))
            try await device.connect()
            func post(_ target: String, _ value: Int64) -> [UInt8] {
                JSONValue.object(JSONObject([("id", .string("1")), ("version", .string("1.0")),
                                             ("params", .object(["bright_value": .integer(value)])),
                                             ("method", .string("thing.event.property.post"))])).serializedBytes()
            }
            let other = try #require(AlinkDialect.split(lights[1]))
            // The broker refuses a post for another device, another device's firmware version, a gateway's
            // topology message (this light is none), and a native report: MQTT 5's PUBACK says not authorized.
            let foreign = [
                "/sys/\(other.productKey)/\(other.deviceName)/thing/event/property/post",
                "/ota/device/inform/\(other.productKey)/\(other.deviceName)",
                "/sys/\(pk)/\(dn)/thing/topo/add",
                "things/\(lights[1])/thing/properties",
            ]
            for topic in foreign {
                await #expect(throws: MQTTError.self, "\(topic)") {
                    try await device.publish(topic, payload: post(lights[1], 999), qos: .atLeastOnce)
                }
            }
            // Its own post is taken, and nothing of the refused ones reached the agent.
            try await device.publish("/sys/\(pk)/\(dn)/thing/event/property/post", payload: post(lights[0], 111),
                                     qos: .atLeastOnce)
            _ = try await harness.waitForInfo(lights[0]) { $0["properties"]?["bright_value"] == 111 }
            #expect(try await harness.info(lights[1])?["properties"]?["bright_value"] != 999)
            await device.disconnect()
        }
    }
}
