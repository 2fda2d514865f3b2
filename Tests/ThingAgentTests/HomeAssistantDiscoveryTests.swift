import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Home Assistant's mapping on its own (docs/home-assistant.md, "What maps to what"): the shipped thing models and
/// made-up ones to discovery configs, states and commands, with no Home Assistant and no broker.
/// `HomeAssistantTests` checks the same against a real Home Assistant.
@Suite("Home Assistant: the mapping")
struct HomeAssistantDiscoveryTests {
    let topics = HomeAssistantTopics(AgentConfiguration.HomeAssistant(), agentStatus: "thing-agent/agents/thing-agent/status")

    static func model(_ product: String) throws -> ThingModel {
        try ThingModels.parse(Array(try shippedModel(product).utf8), file: product)
    }

    static func device(_ id: String, product: String?, model: ThingModel?, properties: String = "{}",
                       info extra: String = "{}", latest: FirmwareCatalog.Image? = nil) throws -> HomeAssistantDevice {
        var snapshot = DeviceSnapshot(id: id, seenAt: t0)
        var fields = try #require(try JSONParser.parse(Array(extra.utf8)).objectValue)
        if let product { fields["productId"] = .string(product) }
        _ = try snapshot.apply(.info(fields, time: t0), now: t0)
        let values = try #require(try JSONParser.parse(Array(properties.utf8)).objectValue)
        _ = try snapshot.apply(.properties(values.map { ($0.key, PropertyValue(value: $0.value, time: t0)) }), now: t0)
        return HomeAssistantDevice(snapshot: snapshot, metadata: nil, model: model, latest: latest)
    }

    func platforms(_ device: HomeAssistantDevice) -> [String: String] {
        Dictionary(uniqueKeysWithValues: device.entities.entities.map { ($0.id, $0.platform) })
    }

    @Test func theShippedLightIsOneLightWithItsSettingsBesideIt() throws {
        let device = try Self.device("lamp1", product: "p-light-1", model: try Self.model("p-light-1"),
                                     properties: #"{"switch_1":true,"bright_value":1000,"temp_current":215,"mode":"colour","label":"Hall"}"#,
                                     info: #"{"firmwareVersion":"1.4.2","name":"Hall light"}"#)
        #expect(platforms(device) == [
            "light": "light", "select:mode": "select", "sensor:temp_current": "sensor", "text:label": "text",
            "button:identify": "button", "firmware": "update",
        ])
        let config = HomeAssistantDiscovery.config(device, entities: device.entities, topics: topics)
        let light = try #require(config["components"]?["light"])
        #expect(light["schema"] == "template" && light["name"] == .null && light["unique_id"] == "thing-agent/lamp1/~light")
        #expect(light["brightness_template"] != nil && light["color_temp_template"] == nil)
        let temperature = try #require(config["components"]?["sensor:temp_current"])
        #expect(temperature["unit_of_measurement"] == "°C" && temperature["device_class"] == "temperature"
                && temperature["state_class"] == "measurement" && temperature["suggested_display_precision"] == 1)
        #expect(config["components"]?["text:label"]?["max"] == 32)
        #expect(config["components"]?["select:mode"]?["options"] == .array(["white", "colour", "scene"]))
        #expect(config["components"]?["button:identify"]?["device_class"] == "identify")
        #expect(config["device"]?["name"] == "Hall light" && config["device"]?["model"] == "Demo light"
                && config["device"]?["model_id"] == "p-light-1" && config["device"]?["sw_version"] == "1.4.2")
        #expect(config["availability_mode"] == "all" && config["availability"]?.arrayValue?.count == 2)
        // Both payloads written out in every entry (Home Assistant's defaults): see `availabilityEntry`.
        #expect(config["availability"]?.arrayValue?.allSatisfy {
            $0["payload_available"] == "online" && $0["payload_not_available"] == "offline"
        } == true)
        #expect(config["origin"]?["name"] == "thing-agent")
        // No topic with a wildcard, every unique id stable.
        let text = JSONValue.object(config).serialized()
        #expect(!text.contains("+") && !text.contains("#"))
        let state = HomeAssistantDiscovery.state(device, entities: device.entities)
        #expect(state["light"] == .object(["state": "on", "brightness": 255]))
        #expect(state["sensor:temp_current"] == .double(21.5) && state["select:mode"] == "colour"
                && state["text:label"] == "Hall")
        #expect(state["firmware"]?["installed_version"] == "1.4.2" && state["firmware"]?["in_progress"] == false)
    }

    @Test func anAlinkTSLLightIsALightItsBooleansOneAndZeroItsEnumsNamed() throws {
        let model = try Self.model("a1Light1")
        #expect(model.property("temp_current")?.scale == 1 && model.property("temp_current")?.unit == "°C")
        let device = try Self.device("a1Light1.l1", product: "a1Light1", model: model,
                                     properties: #"{"switch_1":1,"bright_value":10,"mode":2,"temp_current":-15}"#)
        let state = HomeAssistantDiscovery.state(device, entities: device.entities)
        #expect(state["light"] == .object(["state": "on", "brightness": 1]))
        #expect(state["select:mode"] == "scene" && state["sensor:temp_current"] == .double(-1.5))
        let entities = device.entities
        #expect(try HomeAssistantCommand.read(Array(#"{"light":{"state":"off"}}"#.utf8), entities: entities,
                                              properties: device.snapshot.properties) == [.set(["switch_1": 0])])
        #expect(try HomeAssistantCommand.read(Array(#"{"select:mode":"colour"}"#.utf8), entities: entities,
                                              properties: device.snapshot.properties) == [.set(["mode": 1])])
        #expect(HomeAssistantTopics.objectID(device: "a1Light1.l1") == "a1Light1_2el1")
    }

    @Test func thePlugsMeasurementsAreScaledWithTheirUnitsAndItsSettingsAreConfig() throws {
        let device = try Self.device("plug1", product: "p-plug-1", model: try Self.model("p-plug-1"),
                                     properties: #"{"switch_1":false,"cur_power":1234,"cur_voltage":2301,"countdown_1":120}"#)
        let config = HomeAssistantDiscovery.config(device, entities: device.entities, topics: topics)
        let components = try #require(config["components"]?.objectValue)
        #expect(components["switch:switch_1"]?["platform"] == "switch" && components["switch:switch_1"]?["entity_category"] == nil)
        #expect(components["sensor:cur_power"]?["device_class"] == "power" && components["sensor:cur_power"]?["unit_of_measurement"] == "W")
        #expect(components["sensor:cur_voltage"]?["device_class"] == "voltage")
        let countdown = try #require(components["number:countdown_1"])
        #expect(countdown["step"] == 60 && countdown["unit_of_measurement"] == "s" && countdown["device_class"] == "duration"
                && countdown["entity_category"] == "config")
        #expect(components["switch:child_lock"]?["entity_category"] == "config")
        #expect(components["select:relay_status"]?["options"] == .array(["power_off", "power_on", "last"]))
        let state = HomeAssistantDiscovery.state(device, entities: device.entities)
        #expect(state["switch:switch_1"] == "OFF" && state["sensor:cur_power"] == .double(123.4)
                && state["sensor:cur_voltage"] == .double(230.1) && state["number:countdown_1"] == 120)
        #expect(state["switch:child_lock"] == .null, "not reported yet: unknown in Home Assistant")
    }

    @Test func aCodeNoRuleKnowsIsStillShownAndADeviceWithoutModelToo() throws {
        let device = try Self.device("odd1", product: nil, model: nil,
                                     properties: #"{"flag":true,"level":7,"note":"hi","blob":{"a":[1,2]}}"#)
        #expect(platforms(device) == ["binary_sensor:flag": "binary_sensor", "sensor:level": "sensor",
                                      "sensor:note": "sensor", "sensor:blob": "sensor"])
        let state = HomeAssistantDiscovery.state(device, entities: device.entities)
        #expect(state["binary_sensor:flag"] == "ON" && state["sensor:level"] == 7 && state["sensor:note"] == "hi"
                && state["sensor:blob"] == #"{"a":[1,2]}"#)
        // Nothing of it can be set from Home Assistant.
        #expect(throws: HomeAssistantCommand.Refusal.self) {
            try HomeAssistantCommand.read(Array(#"{"sensor:level":3}"#.utf8), entities: device.entities,
                                          properties: device.snapshot.properties)
        }
        // A code with odd bytes still makes a component id Home Assistant and a template can use.
        #expect(HomeAssistantEntities.componentID("sensor", "a b'\"é") == "sensor:a%20b%27%22%c3%a9")
    }

    @Test func commandsAreReadInTheDevicesTermsAndAnythingElseIsRefused() throws {
        let device = try Self.device("s1", product: "p-sensor-1", model: try Self.model("p-sensor-1"),
                                     properties: #"{"report_period":60}"#, latest: FirmwareCatalog.Image(
                                        version: "2.0.0", url: "https://fw.example/x.bin", sha256: String(repeating: "a", count: 64)))
        let entities = device.entities
        func read(_ text: String) throws -> [HomeAssistantCommand] {
            try HomeAssistantCommand.read(Array(text.utf8), entities: entities, properties: device.snapshot.properties)
        }
        #expect(try read(#"{"number:report_period":120}"#) == [.set(["report_period": 120])])
        #expect(try read(#"{"number:report_period":"120.0"}"#) == [.set(["report_period": 120])])
        #expect(try read(#"{"firmware":"install"}"#) == [.install])
        #expect(try read(#"{"button:identify":"PRESS"}"#) == [.action("identify")])
        for bad in ["", "nope", "[]", "{}", "null", #"{"number:report_period":"many"}"#, #"{"number:report_period":1e300}"#,
                    #"{"sensor:temp_current":1}"#, #"{"firmware":"now"}"#, #"{"button:identify":true}"#,
                    #"{"wifi_signal":1}"#, String(repeating: " ", count: 5000) + "{}"] {
            #expect(throws: HomeAssistantCommand.Refusal.self, "\(bad.prefix(60))") { try read(bad) }
        }
    }

    @Test func aLightWithColourTemperatureAndColourMapsHomeAssistantsScales() throws {
        let model = ThingModel(productId: "tuya-light", properties: [
            PropertySpec(code: "switch_led", kind: .bool, access: .rw),
            PropertySpec(code: "work_mode", kind: .enumeration(["white", "colour", "scene", "music"]), access: .rw),
            PropertySpec(code: "bright_value_v2", kind: .value(min: 10, max: 1000, step: 1), access: .rw),
            PropertySpec(code: "temp_value_v2", kind: .value(min: 0, max: 1000, step: 1), access: .rw),
            PropertySpec(code: "colour_data_v2", kind: .string(maxlen: 255), access: .rw),
        ])
        let device = try Self.device("t1", product: "tuya-light", model: model, properties:
            #"{"switch_led":true,"work_mode":"colour","bright_value_v2":505,"temp_value_v2":0,"colour_data_v2":"{\"h\":120,\"s\":1000,\"v\":1000}"}"#)
        #expect(platforms(device) == ["light": "light"], "the mode goes with the light")
        let state = HomeAssistantDiscovery.state(device, entities: device.entities)
        #expect(state["light"] == .object(["state": "on", "brightness": 128, "color_temp": 2700, "r": 0, "g": 255, "b": 0]))
        let commands = try HomeAssistantCommand.read(Array(#"{"light":{"state":"on","color_temp":6500,"brightness":255}}"#.utf8),
                                                     entities: device.entities, properties: device.snapshot.properties)
        #expect(commands == [.set(["switch_led": true, "temp_value_v2": 1000, "work_mode": "white", "bright_value_v2": 1000])])
        let colour = try HomeAssistantCommand.read(Array(#"{"light":{"state":"on","hue":30,"sat":50}}"#.utf8),
                                                   entities: device.entities, properties: device.snapshot.properties)
        #expect(colour == [.set(["switch_led": true, "work_mode": "colour", "colour_data_v2": #"{"h":30,"s":500,"v":1000}"#])])
        #expect(throws: HomeAssistantCommand.Refusal.self) {
            try HomeAssistantCommand.read(Array(#"{"light":{"state":"on","brightness":900}}"#.utf8),
                                          entities: device.entities, properties: device.snapshot.properties)
        }
        // The mapping both ways ends where it starts.
        let range = (code: "b", min: Int64(10), max: Int64(1000), step: Int64(1))
        for value in [1, 2, 64, 128, 200, 254, 255] {
            let raw = HomeAssistantDiscovery.fromHA(Double(value), range, lower: 1, upper: 255)
            #expect(HomeAssistantDiscovery.toHA(raw, range, lower: 1, upper: 255) == value)
        }
    }

    @Test func aFirmwareUpgradeShowsItsProgress() throws {
        var device = try Self.device("p1", product: "p-plug-1", model: try Self.model("p-plug-1"),
                                     info: #"{"firmwareVersion":"2.0.0"}"#, latest: FirmwareCatalog.Image(
                                        version: "2.1.0", url: "https://fw.example/p.bin", sha256: String(repeating: "b", count: 64),
                                        notes: "faster"))
        device.upgrade = OTAUpgrade(deviceId: "p1", fromVersion: "2.0.0", image: device.latest!, stage: .flashing,
                                    progress: 40, failedCode: "", startedAt: t0, updatedAt: t0, reportTime: t0, endedAt: nil)
        let firmware = HomeAssistantDiscovery.firmware(device)
        #expect(firmware == ["installed_version": "2.0.0", "latest_version": "2.1.0", "title": "Demo plug",
                             "release_summary": "faster", "in_progress": true, "update_percentage": 80])
    }

    @Test func objectIDsAreOnePerDeviceAndTheAgentsIsNone() {
        let ids = ["a.b", "a_2eb", "a_b", "a__b", "a:b", "a-b", "thing-agent_agent"]
        let objects = ids.map(HomeAssistantTopics.objectID(device:))
        #expect(Set(objects).count == ids.count)
        #expect(objects.allSatisfy { $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } })
        #expect(!objects.contains(HomeAssistantTopics.agentObjectID))
        #expect(topics.route("thing-agent/ha/lamp1/set") == .command(device: "lamp1"))
        #expect(topics.route("thing-agent/ha/agent/scenes/set") == .scene)
        #expect(topics.route("homeassistant/status") == .birth)
        #expect(topics.route("thing-agent/ha/a/b/set") == nil && topics.route("thing-agent/ha//set") == nil)
    }

    @Test func theScenesAreOnTheAgentsOwnDevice() throws {
        let config = try #require(HomeAssistantDiscovery.agentConfig(scenes: ["evening", "all off"], topics: topics,
                                                                     removed: ["scene:gone": "scene"]))
        #expect(config["components"]?["scene:evening"]?["payload_on"] == #"{"scene":"evening"}"#)
        #expect(config["components"]?["scene:all%20off"]?["unique_id"] == "thing-agent/scene/all off")
        #expect(config["components"]?["scene:gone"] == .object(["platform": "scene"]), "a removed scene is taken back")
        #expect(HomeAssistantDiscovery.agentConfig(scenes: [], topics: topics) == nil)
    }

    @Test func theSwitchTakesTrueFalseOrAnObjectAndRefusesTheRest() throws {
        var configuration = AgentConfiguration()
        try configuration.apply(key: "homeAssistant", text: "true", source: "test")
        #expect(configuration.homeAssistant.enabled)
        try configuration.apply(key: "homeAssistant", text: #"{"enabled":true,"discoveryPrefix":"ha","topic":"fleet/ha","publishRate":500}"#,
                                source: "THING_AGENT_HOME_ASSISTANT")
        #expect(configuration.homeAssistant == {
            var expected = AgentConfiguration.HomeAssistant()
            (expected.enabled, expected.discoveryPrefix, expected.topic, expected.publishRate) = (true, "ha", "fleet/ha", 500)
            return expected
        }())
        try configuration.checkCombinations()
        for bad in ["yes please", #"{"enabled":"yes"}"#, #"{"topic":"a/+/b"}"#, #"{"discoveryPrefix":""}"#,
                    #"{"publishRate":0}"#, #"{"other":1}"#, "[]"] {
            #expect(throws: ConfigError.self, "\(bad)") {
                var c = AgentConfiguration()
                try c.apply(key: "homeAssistant", text: bad, source: "test")
            }
        }
        var overlapping = AgentConfiguration()
        try overlapping.apply(key: "homeAssistant", text: #"{"enabled":true,"topic":"thing-agent/events/ha"}"#, source: "test")
        #expect(throws: ConfigError.self) { try overlapping.checkCombinations() }
        #expect(TestAlinkUnits.check())
    }
}

/// TSL units that carry their resolution.
enum TestAlinkUnits {
    static func check() -> Bool {
        AlinkTSL.unitAndScale("0.1 °C") == ("°C", 1) && AlinkTSL.unitAndScale("0.01 kWh") == ("kWh", 2)
            && AlinkTSL.unitAndScale("%") == ("%", 0) && AlinkTSL.unitAndScale(" ") == (nil, 0)
            && AlinkTSL.unitAndScale("0.3 m") == ("0.3 m", 0)
    }
}
