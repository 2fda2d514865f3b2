import Foundation
import JSON
import MQTT
import Testing
import TestSupport

/// Home Assistant's MQTT discovery against a real Home Assistant 2025.4.4 (headless, on this machine), the real
/// daemon, the real simulator and a real broker: what a Home Assistant user pointed at the fleet's broker sees,
/// and what happens when they use it. One Home Assistant for the whole suite (its start takes seconds), so the
/// steps run in order in one test; each step prints how long Home Assistant took to show it.
@Suite("Home Assistant: discovery, states and commands against a real Home Assistant", .serialized)
struct HomeAssistantTests {
    static func elapsed(_ since: ContinuousClock.Instant) -> String {
        String(format: "%.2f s", (ContinuousClock.now - since).seconds)
    }

    @Test(.timeLimit(.minutes(20)))
    func theFleetAppearsIsDrivenAndIsTakenBackWhenTurnedOff() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_HOME_ASSISTANT": "true", "THING_AGENT_MODELS": repositoryRoot() + "/Config/models",
                "THING_AGENT_FIRMWARE_CATALOG": repositoryRoot() + "/Config/firmware.json",
                "THING_AGENT_DIALECTS": "native,alink", "THING_AGENT_OFFLINE_GRACE": "600",
            ])
            let ha = try await HomeAssistantInstance.start(directory: harness.directory + "/homeassistant",
                                                           brokerPort: broker.port)
            do {
                try await steps(harness, broker, ha)
                try await ha.stop()
            } catch {
                try? await ha.stop()
                throw error
            }
            try? await harness.stopDaemon()
        }
    }

    /// Every entity (and attribute) the checks of step 1 read: a wait on counts alone once caught Home Assistant
    /// between two discovery configs (the sensor's `report_period` not there yet), and once with a select whose
    /// `options` had not arrived.
    private static func readsAreThere(_ view: HomeAssistantView) -> Bool {
        func first(_ product: String) -> String? {
            view.agentDevices.first { view.device($0)?["model_id"]?.stringValue == product }
        }
        guard let light = first("p-light-1"), let sensor = first("p-sensor-1"), let gateway = first("p-gateway-1")
        else { return false }
        let entities = [(light, "label"), (light, "~action/identify"), (light, "~wifi_signal"),
                        (sensor, "temp_current"), (sensor, "humidity_value"), (sensor, "battery_percentage"),
                        (sensor, "report_period"), (gateway, "zigbee_channel"), (gateway, "led_switch")]
        return entities.allSatisfy { view.state($0.0, $0.1) != nil }
            && view.state(light, "mode")?["attributes"]?["options"] != nil
            && view.state(light, "~firmware")?["attributes"]?["latest_version"] != nil
    }

    private func steps(_ harness: AgentHarness, _ broker: MosquittoBroker, _ ha: HomeAssistantInstance) async throws {
        try await harness.startDaemon()
        let feed = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/+/command")
        defer { Task { await feed.stop() } }

        // 1. The simulated fleet (native and Alink devices, a gateway with a sub-device) appears, each device with
        // the entities of its thing model, within a second or so of its first report.
        var started = ContinuousClock.now
        let fleet = try DaemonProcess(thingAgentExecutable(), [
            "simulate", "--broker", broker.url, "--devices", "3", "--gateways", "1", "--subdevices", "1",
            "--dialect", "native,alink", "--seed", "7",
        ], logPath: harness.directory + "/simulate.log")
        defer { fleet.signal(SIGKILL) }
        // Entities arrive one discovery config at a time: the wait is for the whole fleet, both lights' light
        // entities included (30 entities alone came before the Alink light's under load).
        var view = try await ha.waitFor("the simulated fleet", timeout: .seconds(60)) { view in
            let lights = view.agentDevices.filter { ["p-light-1", "a1Light1"].contains(view.device($0)?["model_id"]?.stringValue ?? "") }
            return view.agentDevices.count >= 5 && view.states.count >= 30
                && view.states.allSatisfy { $0["state"]?.stringValue != "unavailable" }
                && Set(lights.compactMap { view.device($0)?["model_id"]?.stringValue }).count == 2
                && lights.allSatisfy { view.state($0, "~light") != nil } && Self.readsAreThere(view)
        }
        print("Home Assistant shows \(view.agentDevices.count) devices, \(view.states.count) entities, "
              + "\(Self.elapsed(started)) after the simulator started")
        let devices = view.agentDevices
        func product(_ device: String) -> String? { view.device(device)?["model_id"]?.stringValue }
        let light = try #require(devices.first { product($0) == "p-light-1" }, "\(view.summary)")
        let alinkLight = try #require(devices.first { product($0) == "a1Light1" }, "\(view.summary)")
        let gateway = try #require(devices.first { product($0) == "p-gateway-1" })
        let sensor = try #require(devices.first { product($0) == "p-sensor-1" })

        // The device fields: name, manufacturer and model from the thing model, firmware, the gateway.
        let lightDevice = try #require(view.device(light))
        #expect(lightDevice["manufacturer"] == "thing-agent simulator" && lightDevice["model"] == "Demo light",
                "\(lightDevice)")
        #expect(lightDevice["sw_version"]?.stringValue != nil, "\(lightDevice)")
        let sensorDevice = try #require(view.device(sensor))
        #expect(sensorDevice["via_device_id"] == view.device(gateway)?["id"], "a sub-device is reached through its gateway")
        // The kinds: a light (switch_1 with bright_value), a temperature in °C (scale applied), humidity and battery
        // in %, a number with its unit and step, a select, a text, an update, a button, the Wi-Fi signal.
        let lamp = try #require(view.state(light, "~light"), "\(view.summary)")
        #expect(lamp["attributes"]?["supported_color_modes"] == .array(["brightness"]), "\(lamp)")
        #expect(view.state(alinkLight, "~light") != nil, "an Alink TSL light is a light too: \(view.summary)")
        let temperature = try #require(view.state(sensor, "temp_current"))
        #expect(temperature["attributes"]?["unit_of_measurement"] == "°C"
                && temperature["attributes"]?["device_class"] == "temperature"
                && temperature["attributes"]?["state_class"] == "measurement", "\(temperature)")
        let degrees = try #require(Double(temperature["state"]?.stringValue ?? ""), "\(temperature)")
        #expect(degrees >= -40 && degrees <= 80, "the scale is applied: \(temperature)")
        #expect(view.state(sensor, "humidity_value")?["attributes"]?["device_class"] == "humidity")
        #expect(view.state(sensor, "battery_percentage")?["attributes"]?["device_class"] == "battery")
        let period = try #require(view.state(sensor, "report_period"))
        #expect(period["entity_id"]?.stringValue?.hasPrefix("number.") == true
                && period["attributes"]?["step"]?.doubleValue == 10 && period["attributes"]?["unit_of_measurement"] == "s",
                "\(period)")
        #expect(view.state(light, "mode")?["attributes"]?["options"] == .array(["white", "colour", "scene"]))
        #expect(view.state(light, "label")?["entity_id"]?.stringValue?.hasPrefix("text.") == true)
        #expect(view.state(light, "~firmware")?["attributes"]?["latest_version"] == "1.5.0", "the catalog's version")
        #expect(view.state(light, "~action/identify")?["entity_id"]?.stringValue?.hasPrefix("button.") == true)
        #expect(view.state(light, "~wifi_signal")?["attributes"]?["unit_of_measurement"] == "dBm")
        #expect(view.state(gateway, "zigbee_channel")?["entity_id"]?.stringValue?.hasPrefix("sensor.") == true)
        #expect(view.state(gateway, "led_switch")?["entity_id"]?.stringValue?.hasPrefix("switch.") == true)

        // 2. A service call in Home Assistant reaches the simulated device through the tracked set path, and the
        // device's report comes back as the entity's state.
        started = ContinuousClock.now
        let lightEntity = try #require(lamp["entity_id"]?.stringValue)
        try await ha.call("light", "turn_on", #"{"entity_id":"\#(lightEntity)","brightness":128}"#)
        view = try await ha.waitFor("the light on at brightness 128") { view in
            view.state(lightEntity)?["state"] == "on" && view.state(lightEntity)?["attributes"]?["brightness"] == 128
        }
        print("light.turn_on → device → report → Home Assistant's state: \(Self.elapsed(started))")
        let info = try #require(try await harness.info(light))
        #expect(info["properties"]?["switch_1"] == true && info["properties"]?["bright_value"] == 505,
                "Home Assistant's 128 of 255 is 505 of 10–1000: \(info)")
        // The Alink light too (its switch is 0/1 on the wire).
        let alinkEntity = try #require(view.entity(alinkLight, "~light")?["entity_id"]?.stringValue)
        let alinkWasOn = view.state(alinkEntity)?["state"] == "on"
        try await ha.call("light", alinkWasOn ? "turn_off" : "turn_on", #"{"entity_id":"\#(alinkEntity)"}"#)
        view = try await ha.waitFor("the Alink light switched") { view in
            view.state(alinkEntity)?["state"] == (alinkWasOn ? "off" : "on")
        }

        // 3. A command the thing model refuses (off its step) is logged and published as an event; the entity keeps
        // showing what the device reports. A malformed command is refused the same way, and nothing stops.
        let periodEntity = try #require(period["entity_id"]?.stringValue)
        let periodBefore = try #require(view.state(periodEntity)?["state"])
        try await ha.call("number", "set_value", #"{"entity_id":"\#(periodEntity)","value":1234}"#)
        let refusals = try await feed.waitFor(count: 1, timeout: .seconds(15))
        let refusal = try JSONParser.parse(refusals[0].payload)
        #expect(refusals[0].topic == "thing-agent/events/\(sensor)/command", "\(refusals[0].topic)")
        #expect(refusal["data"]?["outcome"] == "invalid" && refusal["data"]?["source"] == "homeAssistant"
                && refusal["data"]?["message"]?.stringValue?.contains("off the step 10") == true, "\(refusal)")
        let malformed = try SimulatedDevice("probe", brokerURL: broker.url)
        try await malformed.connect()
        for payload in ["not json", #"{"number:report_period":"lots"}"#, #"{"no-such-entity":1}"#, "[1,2]", "{}"] {
            try await malformed.client.publish("thing-agent/ha/\(sensor)/set", payload: Array(payload.utf8), qos: .atLeastOnce)
        }
        try await feed.waitFor(count: 6, timeout: .seconds(15))
        await malformed.disconnect()
        #expect(try #require(harness.daemon).isRunning)
        view = try await ha.dump()
        #expect(view.state(periodEntity)?["state"] == periodBefore, "the entity shows what the device reports")

        // 4. A rename and a room change the device in Home Assistant (the room is its area).
        started = ContinuousClock.now
        let edit = try await harness.cli(["edit", light, "--name", "Hall lamp", "--room", "Hall"])
        #expect(edit.status == 0, "\(edit.stderr)")
        view = try await ha.waitFor("the renamed light") { view in
            view.device(light)?["name"] == "Hall lamp" && view.device(light)?["area_id"]?.stringValue != nil
        }
        print("rename → Home Assistant's device name: \(Self.elapsed(started))")
        #expect(view.entity(light, "~light")?["entity_id"]?.stringValue == lightEntity, "the entity keeps its id")
        // Its device page as Home Assistant's frontend shows it, in headless Chromium (docs/home-assistant.md's
        // screenshot is made the same way).
        let page = harness.directory + "/device.png"
        let haDevice = try #require(view.device(light)?["id"]?.stringValue)
        try await ha.helper(["screenshot", ha.directory, "--port", "\(ha.port)", "/config/devices/device/\(haDevice)", page,
                             "--wait-ms", "15000"], timeout: .seconds(180))
        let png = try #require(FileManager.default.contents(atPath: page))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]) && png.count > 20_000, "\(png.count) bytes")

        // 5. Availability: a device that goes offline is unavailable, and available again when it returns.
        let plug = try SimulatedDevice("plug-ha", brokerURL: broker.url)
        try await plug.connect()
        try await plug.info(#"{"productId":"p-plug-1","name":"Desk plug","mac":"a4:c1:38:00:11:22"}"#, time: t0)
        try await plug.status(true, time: t0)
        try await plug.properties(#"{"switch_1":true,"cur_power":123,"cur_voltage":2301,"mystery":"x"}"#, time: t0 + 1)
        view = try await ha.waitFor("the plug") { view in
            view.state("plug-ha", "switch_1")?["state"] == "on" && view.state("plug-ha", "mystery")?["state"] == "x"
        }
        #expect(view.state("plug-ha", "cur_power")?["state"] == "12.3"
                && view.state("plug-ha", "cur_power")?["attributes"]?["device_class"] == "power", "\(view.summary)")
        #expect(view.state("plug-ha", "cur_voltage")?["state"] == "230.1")
        #expect(view.device("plug-ha")?["connections"] == .array([.array(["mac", "a4:c1:38:00:11:22"])]))
        try await plug.status(false, time: t0 + 2)
        try await ha.waitFor("the plug unavailable") { $0.state("plug-ha", "switch_1")?["state"] == "unavailable" }
        try await plug.status(true, time: t0 + 3)
        try await ha.waitFor("the plug back") { $0.state("plug-ha", "switch_1")?["state"] == "on" }

        // 6. The agent stops: every entity is unavailable (its status is offline); back when it is.
        try await harness.stopDaemon()
        try await ha.waitFor("everything unavailable") { view in
            view.states.allSatisfy { $0["state"] == "unavailable" }
        }
        try await harness.startDaemon()
        try await ha.waitFor("the plug available again") { $0.state("plug-ha", "switch_1")?["state"] == "on" }

        // 7. remove deletes the device's entities (empty retained configs).
        let removal = try await harness.cli(["remove", "plug-ha"])
        #expect(removal.status == 0, "\(removal.stderr)")
        try await ha.waitFor("the plug gone") { $0.device("plug-ha") == nil && $0.entity("plug-ha", "switch_1") == nil }
        await plug.disconnect()

        // 8. Home Assistant restarts: the fleet is there again (the agent publishes everything on its birth
        // message), with the same entity ids.
        let before = try await ha.dump()
        try await ha.restart()
        view = try await ha.waitFor("the fleet after Home Assistant's restart") { view in
            view.agentDevices.count == before.agentDevices.count
                && view.state(lightEntity)?["state"] == "on"
        }
        // The same entities with the same ids (a device may have reported more since: its firmware, say).
        let entitiesBefore: Set<String> = Set(before.entities.compactMap { $0["entity_id"]?.stringValue })
        let entitiesAfter: Set<String> = Set(view.entities.compactMap { $0["entity_id"]?.stringValue })
        #expect(entitiesBefore.isSubset(of: entitiesAfter), "\(entitiesBefore.subtracting(entitiesAfter))")
        try await waitUntil(timeout: .seconds(20)) {
            harness.daemon?.log.contains("Home Assistant is back") == true
        }

        // Home Assistant refused and warned about nothing the agent sent.
        #expect(ha.mqttComplaints.isEmpty, "\(ha.mqttComplaints.joined(separator: "\n"))")

        // 9. Turned off: the daemon's next start takes back everything it published.
        try await harness.stopDaemon()
        try await harness.startDaemon([], environment: ["THING_AGENT_HOME_ASSISTANT": "false"])
        started = ContinuousClock.now
        try await ha.waitFor("no thing-agent device") { $0.agentDevices.isEmpty && $0.entities.isEmpty }
        print("homeAssistant off → Home Assistant empty: \(Self.elapsed(started))")
        try await waitUntil(timeout: .seconds(10)) {
            harness.daemon?.log.contains("removed what it was given") == true
        }
        fleet.signal(SIGTERM)
    }
}
