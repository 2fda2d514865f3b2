import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent
@testable import thing_agent

/// `thing-agent simulate --dialect tuyalink` against the real daemon on a real broker: the simulated devices of
/// Tuya's SDK (a light, a gateway and its sub-devices), on a listener of their own, are cached with the products the
/// daemon was given, answer sets, actions and upgrades through it; the gateway binds its sub-devices, logs them in and
/// reports for them in its batch reports; events are kept.
@Suite("TuyaLink: the simulated fleet and the daemon", .serialized)
struct TuyaLinkSimulatorTests {
    static let fleet = ["--dialect", "tuyalink", "--devices", "2", "--gateways", "1", "--subdevices", "2", "--seed", "5"]

    @Test(.timeLimit(.minutes(3)))
    func aSimulatedTuyaLinkFleetIsCachedAndAnswersSetsActionsAndUpgrades() async throws {
        // The devices' own listener (as deploy/mosquitto-tuyalink.conf, without TLS); the broker's client events tell
        // the daemon when a device, which announces no status, connects and leaves.
        let tuyaLinkPort = try freeLoopbackPort()
        defer { releaseLoopbackPort(tuyaLinkPort) }
        var options = MosquittoBroker.Options()
        options.extraConfig = "log_dest topic\nlistener \(tuyaLinkPort) 127.0.0.1\n"
        try await withBroker(options) { broker in
            // What the daemon must be told, as simulate prints it: the products of the directly connected devices.
            let plans = AlinkSimulatorTests.plans(devices: 2, gateways: 1, subdevices: 2, seed: 5, dialects: [.tuyalink])
            let printed = try await runCommand(thingAgentExecutable(), ["simulate"] + Self.fleet + ["--device-products"])
            #expect(printed.status == 0, "\(printed.stderr)")
            let products = try JSONParser.parse(printed.stdout)
            #expect(products == .object(FleetPlan.deviceProducts(plans)) && products.objectValue?.count == 3, "\(products)")

            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_DIALECTS": "native,tuyalink", "THING_AGENT_MODELS": shippedModelsDirectory(),
                "THING_AGENT_DEVICE_PRODUCTS": printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            ])
            try await harness.startDaemon()
            let wire = try await TopicRecorder.start(broker.url, filter: "tylink/#")
            defer { Task { await wire.stop() } }
            let simulator = try DaemonProcess(thingAgentExecutable(), ["simulate"] + Self.fleet + [
                "--ota-step", "0.2", "--report-interval", "1", "--broker", broker.url,
                "--tuyalink-broker", "mqtt://127.0.0.1:\(tuyaLinkPort)",
            ], logPath: harness.directory + "/simulate.out")
            defer { simulator.signal(SIGKILL) }
            let fleet = try await AlinkSimulatorTests.waitForFleet(harness, plans.map(\.id), simulator: simulator)
            #expect(simulator.log.contains(#"THING_AGENT_DEVICE_PRODUCTS): {"tl-gw-"#), "\(simulator.log)")

            let light = try #require(plans.first { $0.category == .device }).id
            let gateway = try #require(plans.first { $0.category == .gateway }).id
            let subs = plans.filter { $0.category == .subdevice }.map(\.id)
            // Each with its product (the light and the gateway from deviceProducts, a sub-device from its bind), its
            // dialect and its firmware; the sub-devices linked to the gateway.
            for plan in plans {
                let info = try #require(fleet[plan.id])
                #expect(info["productId"]?.stringValue == plan.productId && info["dialect"] == "tuyalink", "\(info)")
                #expect(info["firmwareVersion"]?.stringValue == plan.firmwareVersion, "\(info)")
                if plan.category == .subdevice { #expect(info["gatewayId"]?.stringValue == gateway, "\(info)") }
            }
            // Connected as Tuya's SDK connects, on the TuyaLink listener: MQTT 3.1.1 (p2), a clean session (c1), the
            // signed user name.
            let brokerLog = broker.log()
            #expect(brokerLog.contains("on port \(tuyaLinkPort)"), "\(brokerLog)")
            #expect(brokerLog.contains("as tuyalink_\(light) (p2, c1, k30, u'\(light)|signMethod=hmacSha256,timestamp="),
                    "\(brokerLog)")

            // The gateway bound its sub-devices by their client ids, got their ids back, then logged them in.
            func payloads(_ suffix: String) -> [JSONValue] {
                wire.messages.filter { $0.topic.hasSuffix(suffix) }.compactMap { try? JSONParser.parse($0.payload) }
            }
            // The recorder's task may lag behind the cache under load: it has them once it has the login.
            try await waitUntil(timeout: .seconds(20)) { wire.messages.contains { $0.topic.hasSuffix("/device/sub/login") } }
            let bind = try #require(payloads("/device/sub/bind").first)
            #expect(bind["data"]?.arrayValue?.compactMap { $0["clientId"]?.stringValue } == subs, "\(bind)")
            let bound = try #require(payloads("/device/sub/bind_response").first)
            #expect(bound["msgId"] == bind["msgId"] && bound["code"] == 0)
            #expect(bound["data"]?.arrayValue?.compactMap { $0["deviceId"]?.stringValue } == subs, "\(bound)")
            let topics = wire.messages.map(\.topic)
            let answeredAt = try #require(topics.firstIndex(of: "tylink/\(gateway)/device/sub/bind_response"))
            let loginAt = try #require(topics.firstIndex(of: "tylink/\(gateway)/device/sub/login"))
            #expect(answeredAt < loginAt)
            #expect(payloads("/device/sub/login").first?["data"] == .array(subs.map(JSONValue.string)))
            // Their reports come both ways: in the gateway's batch reports and on their own topics.
            let batched = Set(payloads("/thing/data/batch_report").flatMap { batch in
                (batch["data"]?["subDevices"]?.arrayValue ?? []).compactMap { $0["deviceId"]?.stringValue }
            })
            #expect(batched == Set(subs), "\(batched)")
            try await waitUntil(timeout: .seconds(20)) {
                subs.allSatisfy { Self.topics(wire).contains("tylink/\($0)/thing/property/report") }
            }

            // A set: the model refuses what is out of range before anything is sent; the device answers with the
            // set's msgId and no code, then reports the values it applied.
            let refused = try await harness.cli(["set", light, "bright_value=5000"])
            #expect(refused.status == 3, "\(refused.stdout) \(refused.stderr)")
            let set = try await harness.cli(["set", light, "bright_value=420", "switch_1=true"])
            #expect(set.status == 0 && set.stdout.contains("applied"), "\(set.stdout) \(set.stderr)")
            _ = try await harness.waitForInfo(light) {
                $0["properties"]?["bright_value"] == 420 && $0["properties"]?["switch_1"] == true
            }
            let sent = try #require(payloads("/\(light)/thing/property/set").last)
            let answer = try #require(payloads("/\(light)/thing/property/set_response").last)
            #expect(answer["msgId"] == sent["msgId"] && answer["code"] == nil, "\(answer)")
            // A sub-device's set goes through its gateway's connection.
            let subSet = try await harness.cli(["set", subs[0], "report_period=120"])
            #expect(subSet.status == 0, "\(subSet.stdout) \(subSet.stderr)")
            _ = try await harness.waitForInfo(subs[0]) { $0["properties"]?["report_period"] == 120 }

            // An action, answered on execute_response with its output.
            let action = try await harness.cli(["action", light, "identify", "times=4"])
            #expect(action.status == 0 && action.stdout.contains("blinked = 4"), "\(action.stdout) \(action.stderr)")
            let subAction = try await harness.cli(["action", subs[1], "identify"])
            #expect(subAction.status == 0 && subAction.stdout.contains("blinked = 3"), "\(subAction.stdout) \(subAction.stderr)")

            // Now and then an event (a light's fault, a gateway's alarm, a sensor's button), kept as the latest of its kind.
            try await waitUntil(timeout: .seconds(60)) {
                var seen = false
                for plan in plans where !seen {
                    seen = (try? await harness.info(plan.id))?["events"]?.objectValue?.isEmpty == false
                }
                return seen
            }

            // An upgrade: the issue, the device's progress, then its new firmware ends it.
            let sha256 = String(repeating: "ab", count: 32)
            for device in [light, subs[0]] {
                let ota = try await harness.cli([
                    "ota", device, "--version", "9.0.0", "--url", "http://fw.example/fw-9.0.0.bin", "--sha256", sha256,
                    "--size", "4096", "--timeout", "30",
                ], timeout: .seconds(45))
                #expect(ota.status == 0, "\(ota.stdout) \(ota.stderr)\n\(simulator.log)")
                let info = try #require(try await harness.info(device))
                #expect(info["firmwareVersion"] == "9.0.0" && info["upgrade"]?["stage"] == "succeeded", "\(info)")
            }

            // Everything the devices sent was read: nothing was dropped.
            let stats = try await harness.stats()
            let dropped = stats["dropped"]?.objectValue ?? [:]
            #expect(dropped.allSatisfy { $0.value.int64Value == 0 }, "\(stats)")

            // The fleet stops: the gateway logs its sub-devices out, and the broker says the light has left.
            simulator.signal(SIGTERM)
            #expect(await simulator.waitForExit(timeout: .seconds(30)) == 0, "\(simulator.log)")
            _ = try await harness.waitForInfo(subs[0]) { $0["online"] == false }
            _ = try await harness.waitForInfo(light) { $0["online"] == false }
        }
    }

    static func topics(_ recorder: TopicRecorder) -> [String] { recorder.messages.map(\.topic) }

    @Test(.timeLimit(.minutes(1)))
    func simulateSaysItsTuyaLinkOptionsAndRefusesWrongOnes() async throws {
        let help = try await runCommand(thingAgentExecutable(), ["simulate", "--help"])
        for word in ["tuyalink", "--tuyalink-broker", "--device-products", "deviceProducts"] {
            #expect(help.stdout.contains(word), "\(word): \(help.stdout)")
        }
        let port = try freeLoopbackPort()
        defer { releaseLoopbackPort(port) }
        for flags in [["--dialect", "tuyalink,tuyalink"], ["--dialect", "tuya"],
                      ["--dialect", "tuyalink", "--tuyalink-broker", "http://127.0.0.1:1"]] {
            let bad = try await runCommand(thingAgentExecutable(), ["simulate", "--broker", "mqtt://127.0.0.1:\(port)"] + flags)
            #expect(bad.status == 2 && (bad.stderr.contains("--dialect") || bad.stderr.contains("--tuyalink-broker")),
                    "\(flags): \(bad.stderr)")
        }
        // A fleet with no TuyaLink device needs no products.
        let none = try await runCommand(thingAgentExecutable(), ["simulate", "--devices", "2", "--device-products"])
        #expect(none.status == 0 && none.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "{}", "\(none.stdout)")
    }
}
