import Foundation
import JSON
import Testing
import TestSupport
import ThingAgent
@testable import thing_agent

/// `thing-agent simulate` as a child process, driven through the library.
@Suite("thing-agent simulate", .serialized)
struct SimulatorTests {
    /// A daemon-role agent in this process on `broker`, with its cache in `directory`, speaking `dialects`.
    static func startAgent(_ broker: MosquittoBroker, directory: String, dialects: [String] = ["native"],
                           deviceProducts: [String: String] = [:]) async throws -> (Agent, Task<Void, any Error>) {
        var configuration = AgentConfiguration()
        configuration.dialects = dialects
        configuration.deviceProducts = deviceProducts
        configuration.mqtt.broker = broker.url
        configuration.cache.database = directory + "/cache-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        configuration.mqtt.clientID = "sim-test-\(UInt32.random(in: 0...UInt32.max))"
        configuration.requestTimeout = .seconds(5)
        let agent = try Agent(configuration: configuration)
        let running = Task { try await agent.run() }
        // Subscribed, not only connected: a simulator that starts between the CONNACK and the SUBACK had its first
        // property reports (QoS 1, not retained) go to nobody, while its retained status and info still came (the
        // flake of sameSeedSameFleetAndValues under load: 15 of 19 messages, every property report missing).
        try await agent.waitUntilConnected(timeout: .seconds(30))
        return (agent, running)
    }

    static func simulate(_ broker: MosquittoBroker, _ arguments: [String], log: String) throws -> DaemonProcess {
        try DaemonProcess(thingAgentExecutable(), ["simulate", "--broker", broker.url] + arguments, logPath: log)
    }

    static func ids(_ agent: Agent, _ category: DeviceCategory) -> [String] {
        agent.cache.all().filter { $0.info.category == category }.map(\.id)
    }

    @Test(.timeLimit(.minutes(3)))
    func simulatedDevicesAnswerWhatTheyAreAsked() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (agent, running) = try await Self.startAgent(broker, directory: directory)
            defer { running.cancel() }
            // A transfer takes four 2 s steps, so that the second start below comes while it runs (it is refused),
            // however slowly the machine gets to it (with four 1 s steps, once beside a second suite, the first had
            // finished before the second start arrived); the run lasts long enough for the transfer to finish, also
            // when two suites run at once on two cores (25 s was not: the run ended in the transfer's first step).
            let simulator = try Self.simulate(broker, [
                "--devices", "3", "--gateways", "2", "--subdevices", "2", "--seed", "1", "--duration", "60",
                "--transfer-step", "2"], log: directory + "/simulate.log")
            try await waitUntil(timeout: .seconds(10)) {
                agent.cache.count == 9 && agent.cache.all().allSatisfy { $0.online == true && $0.info.name != nil }
            }
            let lights = Self.ids(agent, .device), gateways = Self.ids(agent, .gateway)
            #expect(lights.count == 3 && gateways.count == 2 && Self.ids(agent, .subdevice).count == 4)
            let light = try #require(lights.first)

            // A set the model allows: accepted, then reported like a real device.
            let accepted = try await agent.request(.setProperties, to: light, data: ["bright_value": 500, "mode": "scene"])
            #expect(accepted.code == 0)
            try await waitUntil {
                let properties = agent.cache.device(light)?.properties
                return properties?["bright_value"]?.value == 500 && properties?["mode"]?.value == "scene"
            }
            // Sets the model refuses, with docs/protocol.md's codes; nothing changes.
            let refusals: [(JSONObject, Int)] = [
                (["bright_value": 5000], 1005), (["mode": "disco"], 1005), (["label": .string(String(repeating: "x", count: 40))], 1005),
                (["nosuch": 1], 1004), (["temp_current": 300], 1004), (["bright_value": "high"], 1003), (["switch_1": 1], 1003),
            ]
            for (data, code) in refusals {
                await #expect {
                    try await agent.request(.setProperties, to: light, data: .object(data))
                } throws: { error in
                    guard case RequestError.refused(let refused, _) = error else { return false }
                    return refused == code
                }
            }
            #expect(agent.cache.device(light)?.properties["bright_value"]?.value == 500)

            // info/get: the full device information.
            let info = try await agent.fetchInfo(light)
            #expect(info.productId == "p-light-1")
            #expect(info.hardwareInfo?["module"] == "WBR3")
            #expect(info.supports(.wifiList))

            // wifi/scan: one line per SSID, strongest first (the simulator repeats one and adds a hidden one).
            let networks = try await agent.scanWifiList(light)
            #expect(networks.count >= 4)
            #expect(Set(networks.map(\.ssid)).count == networks.count)
            #expect(!networks.contains { $0.ssid.isEmpty })
            #expect(networks.map(\.rssi) == networks.map(\.rssi).sorted(by: >))

            // A gateway transfer through to finish, refusing a second start meanwhile.
            let (faulty, new) = (gateways[0], gateways[1])
            let moving = agent.cache.subDevices(of: faulty).map(\.id)
            #expect(moving.count == 2)
            let manager = GatewayTransferManager(deviceId: new, agent: agent)
            let updates = manager.statusUpdates
            try await manager.transfer(fromGateway: faulty)
            await #expect(throws: RequestError.refused(code: 1006, message: "a transfer is already running")) {
                try await agent.request(.gatewayTransferStart, to: new, data: ["targetDeviceId": .string(faulty)])
            }
            var stages: [TransferStatus] = []
            for await info in updates {
                stages.append(info.status)
                if info.status == .finish || info.status == .failed { break }
            }
            // The start is recorded once the gateway accepted, and its first report may come before that record
            // (which then changes nothing: the transfer has moved on): `unknown` first, or not at all.
            #expect(Array(stages.drop { $0 == .unknown }) == [.deviceConfigInit, .deviceDataInit, .osConfigInit, .finish],
                    "\(stages)")
            #expect(stages.filter { $0 == .unknown }.count <= 1, "\(stages)")
            #expect(Set(moving).isSubset(of: agent.cache.subDevices(of: new).map(\.id)))

            // When its time is up the simulator stops by itself and says every device is offline.
            let status = await simulator.waitForExit(timeout: .seconds(60))
            #expect(status == 0, "\(simulator.log)")
            try await waitUntil { agent.cache.all().allSatisfy { $0.online == false } }
            #expect(simulator.log.contains("simulate: stopped"))
            // The moved sub-devices' own later info reports name their new gateway too.
            #expect(moving.allSatisfy { agent.cache.device($0)?.info.gatewayId == new })
            running.cancel()
            _ = try? await running.value
        }
    }

    /// `--dialect native,alink,tuyalink` splits the devices and the gateways each in that order, and an agent that
    /// speaks the three (given the TuyaLink devices' products) caches every one in its dialect, sets a light of
    /// each, and sees every one go offline when the fleet stops.
    @Test(.timeLimit(.minutes(2)))
    func aFleetOfThreeDialectsIsSplitInTheirOrderAndCached() async throws {
        var options = MosquittoBroker.Options()
        // The broker's client events: how the agent learns that a device which announces no status has left.
        options.extraConfig = "log_dest topic\n"
        try await withBroker(options) { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let plans = AlinkSimulatorTests.plans(devices: 3, gateways: 3, subdevices: 1, seed: 3,
                                                  dialects: [.native, .alink, .tuyalink])
            #expect(plans.map(\.dialect) == [.native, .native, .alink, .alink, .tuyalink, .tuyalink, .native, .alink,
                                              .tuyalink])
            let products = Dictionary(uniqueKeysWithValues: FleetPlan.deviceProducts(plans).compactMap { id, product in
                product.stringValue.map { (id, $0) }
            })
            let (agent, running) = try await Self.startAgent(broker, directory: directory,
                                                             dialects: ["native", "alink", "tuyalink"],
                                                             deviceProducts: products)
            defer { running.cancel() }
            let simulator = try Self.simulate(broker, [
                "--dialect", "native,alink,tuyalink", "--devices", "3", "--gateways", "3", "--subdevices", "1",
                "--seed", "3", "--duration", "15", "--report-interval", "1"], log: directory + "/simulate.log")
            try await waitUntil(timeout: .seconds(30)) {
                plans.allSatisfy { plan in
                    guard let device = agent.cache.device(plan.id) else { return false }
                    return device.online == true && !device.properties.isEmpty
                }
            }
            for plan in plans {
                let device = try #require(agent.cache.device(plan.id))
                #expect(device.info.productId == plan.productId, "\(plan.id): \(device.info)")
                switch plan.dialect {
                case .native: #expect(device.info.name == plan.name)
                case .alink: #expect(plan.id.hasPrefix(plan.productId + "."))
                case .tuyalink: #expect(device.info["dialect"] == "tuyalink" && plan.id.hasPrefix("tl-"), "\(device.info)")
                }
                if plan.category == .subdevice { #expect(device.info.gatewayId == plan.gatewayId, "\(device.info)") }
            }
            // A set to the light of each dialect is answered and then reported, in its dialect's values.
            for plan in plans where plan.category == .device {
                let on: JSONValue = plan.dialect == .alink ? 1 : true
                let answer = try await agent.request(.setProperties, to: plan.id, data: ["bright_value": 640, "switch_1": on])
                #expect(answer.code == 0, "\(plan.id)")
                try await waitUntil {
                    let properties = agent.cache.device(plan.id)?.properties
                    return properties?["bright_value"]?.value == 640 && properties?["switch_1"]?.value == on
                }
            }
            // The duration ends the fleet: native devices say they are offline, Alink and TuyaLink gateways log
            // their sub-devices out, and the broker says the others have left.
            #expect(await simulator.waitForExit(timeout: .seconds(60)) == 0, "\(simulator.log)")
            try await waitUntil(timeout: .seconds(10)) { plans.allSatisfy { agent.cache.device($0.id)?.online == false } }
            running.cancel()
            _ = try? await running.value
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func sameSeedSameFleetAndValues() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            /// Runs a short simulation next to a fresh agent and returns the printed fleet and what the agent cached.
            func run(seed: String) async throws -> (table: String, devices: [String: JSONObject], stats: String) {
                let (agent, running) = try await Self.startAgent(broker, directory: directory)
                let result = try await runCommand(thingAgentExecutable(), [
                    "simulate", "--broker", broker.url, "--devices", "2", "--gateways", "1", "--subdevices", "1",
                    "--seed", seed, "--duration", "1", "--report-interval", "0", "--signal-interval", "0"])
                #expect(result.status == 0, "\(result.stderr)")
                try await waitUntil { agent.cache.count >= 4 && agent.cache.all().allSatisfy { $0.online == false } }
                var devices: [String: JSONObject] = [:]
                for device in agent.cache.all() {
                    var json = device.json(now: 0)
                    for volatile in ["statusChangedAt", "propertyTimes", "wifiSignalTime", "wifiSignalAge", "firstSeen",
                                     "updatedAt", "online", "status"] { json[volatile] = nil }
                    devices[device.id] = json
                }
                running.cancel()
                _ = try? await running.value
                let table = result.stdout.split(separator: "\n").filter { !$0.hasPrefix("simulate:") }.joined(separator: "\n")
                // What to read when a run differs: the simulator's own count of what it sent, and the agent's of
                // what it took.
                let stats = result.stdout.split(separator: "\n").filter { $0.hasPrefix("simulate:") }.joined(separator: "; ")
                    + " | agent: \(agent.statistics)"
                return (table, devices, stats)
            }
            let first = try await run(seed: "1")
            let again = try await run(seed: "1")
            #expect(first.table == again.table)
            #expect(first.table.contains("gw-") && first.table.contains("sub-") && first.table.contains("dev-"))
            let ids = first.devices.keys.filter { first.table.contains($0) }
            #expect(ids.count == 4)
            for id in ids {
                #expect(first.devices[id] == again.devices[id], "\(id) differs between runs: \(first.stats) / \(again.stats)")
            }
            let other = try await run(seed: "2")
            #expect(other.table != first.table)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aKilledSimulatorsDevicesGoOfflineByTheirWill() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (agent, running) = try await Self.startAgent(broker, directory: directory)
            defer { running.cancel() }
            let simulator = try Self.simulate(broker, ["--devices", "2", "--gateways", "1", "--subdevices", "1", "--seed", "5"],
                                              log: directory + "/simulate.log")
            try await waitUntil(timeout: .seconds(10)) {
                agent.cache.count == 4 && agent.cache.all().allSatisfy { $0.online == true }
            }
            let killedAt = Timestamp.current
            simulator.signal(SIGKILL)
            // Devices and gateways have their own connection and will; a sub-device speaks through its gateway
            // and has none (its offline status is published on a clean stop only).
            let withWill = Self.ids(agent, .device) + Self.ids(agent, .gateway)
            try await waitUntil(timeout: .seconds(10)) { withWill.allSatisfy { agent.cache.device($0)?.online == false } }
            for id in withWill {
                // The will has no time: the agent stamped its arrival.
                #expect((agent.cache.device(id)?.statusChangedAt ?? 0) >= killedAt)
            }
            #expect(Self.ids(agent, .subdevice).allSatisfy { agent.cache.device($0)?.online == true })
            running.cancel()
            _ = try? await running.value
        }
    }
}
