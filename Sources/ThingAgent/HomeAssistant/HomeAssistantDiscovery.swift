import FoundationEssentials
import Glibc
import JSON
import ThingAgentCore

/// One device as the discovery, its state and its commands see it: its snapshot and what the agent knows beside it.
struct HomeAssistantDevice: Sendable {
    var snapshot: DeviceSnapshot
    var metadata: DeviceMetadata?
    var model: ThingModel?
    /// The catalog's latest image for its product.
    var latest: FirmwareCatalog.Image?
    /// Its running or latest firmware upgrade.
    var upgrade: OTAUpgrade?

    var entities: HomeAssistantEntities {
        HomeAssistantEntities(snapshot: snapshot, model: model,
                              hasFirmware: latest != nil || snapshot.info.firmwareVersion != nil)
    }
}

/// Home Assistant's MQTT discovery, a device's state and the reading of its commands (docs/home-assistant.md).
/// Pure: unit-tested without Home Assistant, and checked against a real one by `HomeAssistantTests`.
enum HomeAssistantDiscovery {
    /// Every unique id and device identifier starts with this, then the device id: stable across restarts,
    /// renames and moves.
    static let idPrefix = "thing-agent"

    static var origin: JSONObject { JSONObject([("name", "thing-agent"), ("sw_version", .string(ThingAgentVersion.current))]) }

    static func identifier(_ device: String) -> String { "\(idPrefix)/\(device)" }

    /// The device-based discovery config (`<prefix>/device/<object id>/config`): the device, its origin, its
    /// availability (the agent's status and the device's presence, both), and one component per entity, plus
    /// `{"platform"}` alone for each component of `removed` (id → platform), which Home Assistant then deletes.
    static func config(_ device: HomeAssistantDevice, entities: HomeAssistantEntities, topics: HomeAssistantTopics,
                       removed: [String: String] = [:]) -> JSONObject {
        let id = device.snapshot.id
        var components = JSONObject()
        for entity in entities.entities {
            components[entity.id] = .object(component(entity, device: device, topics: topics))
        }
        for (componentID, platform) in removed.sorted(by: { $0.key < $1.key }) where components[componentID] == nil {
            components[componentID] = .object(JSONObject([("platform", .string(platform))]))
        }
        return JSONObject([
            ("device", .object(deviceBlock(device))),
            ("origin", .object(origin)),
            ("availability", .array([
                availabilityEntry(topics.agentStatus, template: "{{ value_json.status }}"),
                availabilityEntry(topics.availability(id)),
            ])),
            ("availability_mode", "all"),
            ("qos", 1),
            ("components", .object(components)),
        ])
    }

    /// One entry of an `availability` list. The payloads are Home Assistant's defaults, written out: under load Home
    /// Assistant 2025.4 was seen to set up an entity of a device-based config from an entry its schema had not
    /// filled in (`KeyError: 'payload_available'`), and the entity never appeared.
    static func availabilityEntry(_ topic: String, template: String? = nil) -> JSONValue {
        var entry = JSONObject([("topic", .string(topic))])
        if let template { entry["value_template"] = .string(template) }
        entry["payload_available"] = "online"
        entry["payload_not_available"] = "offline"
        return .object(entry)
    }

    /// The device block: identifiers, name (the local one when set), manufacturer, model, firmware and hardware
    /// versions, MAC, the room as suggested area, the gateway it is reached through.
    static func deviceBlock(_ device: HomeAssistantDevice) -> JSONObject {
        let info = device.snapshot.info
        var block = JSONObject([
            ("identifiers", .array([.string(identifier(device.snapshot.id))])),
            ("name", .string(device.snapshot.displayName(device.metadata) ?? device.snapshot.id)),
        ])
        if let maker = device.model?.manufacturer ?? info.vendorName { block["manufacturer"] = .string(maker) }
        if let product = info.productId {
            block["model"] = .string(device.model?.name ?? product)
            block["model_id"] = .string(product)
        }
        if let version = info.firmwareVersion { block["sw_version"] = .string(version) }
        if let hardware = info.hardwareInfo {
            for key in ["hardwareVersion", "hwVersion", "version", "module"] {
                if let text = hardware[key]?.stringValue, !text.isEmpty {
                    block["hw_version"] = .string(text)
                    break
                }
            }
        }
        if let mac = info.mac, !mac.isEmpty { block["connections"] = .array([.array(["mac", .string(mac)])]) }
        if let room = device.metadata?.room, !room.isEmpty { block["suggested_area"] = .string(room) }
        if let gateway = info.gatewayId, gateway != device.snapshot.id {
            block["via_device"] = .string(identifier(gateway))
        }
        return block
    }

    /// `value_json['<id>']` in a template: component ids hold no quote (`componentID`).
    static func read(_ id: String) -> String { "value_json['\(id)']" }

    /// `{"<id>":<value>}` as a command payload, `value` a JSON literal or a template expression.
    static func command(_ id: String, _ value: String) -> String { "{\"\(id)\":\(value)}" }

    static func component(_ entity: HomeAssistantEntities.Entity, device: HomeAssistantDevice,
                          topics: HomeAssistantTopics) -> JSONObject {
        let id = device.snapshot.id
        var c = JSONObject([("platform", .string(entity.platform))])
        let state = JSONValue.string(topics.state(id)), commands = JSONValue.string(topics.command(id))
        let value = "{{ \(read(entity.id)) }}"
        switch entity.role {
        case .property(let code, let spec, let shape):
            c["unique_id"] = .string("\(identifier(id))/\(code)")
            c["name"] = .string(spec?.name ?? HomeAssistantEntities.humanized(code))
            let writable = spec.map { $0.access != .ro } ?? false
            if writable, !HomeAssistantEntities.lightSwitches.contains(code) { c["entity_category"] = "config" }
            if spec?.access != .wo {
                c["state_topic"] = state
                c["value_template"] = .string(value)
            }
            if writable { c["command_topic"] = commands }
            switch shape {
            case .toggle:
                if writable {
                    c["payload_on"] = .string(command(entity.id, "\"ON\""))
                    c["payload_off"] = .string(command(entity.id, "\"OFF\""))
                    c["state_on"] = "ON"
                    c["state_off"] = "OFF"
                } else {
                    c["payload_on"] = "ON"
                    c["payload_off"] = "OFF"
                }
            case .number(let min, let max, let step):
                c["min"] = number(min)
                c["max"] = number(max)
                c["step"] = number(step)
                c["command_template"] = .string(command(entity.id, "{{ value }}"))
                if let spec {
                    let (unit, deviceClass) = HomeAssistantEntities.numberUnit(spec)
                    if let unit { c["unit_of_measurement"] = .string(unit) }
                    if let deviceClass { c["device_class"] = .string(deviceClass) }
                }
            case .measurement(let unit, let deviceClass, let stateClass):
                if let unit { c["unit_of_measurement"] = .string(unit) }
                if let deviceClass { c["device_class"] = .string(deviceClass) }
                if let stateClass { c["state_class"] = .string(stateClass) }
                if let scale = spec?.scale, scale > 0 { c["suggested_display_precision"] = .integer(Int64(scale)) }
            case .options(let options):
                c["options"] = .array(options.map { .string($0.name) })
                if writable {
                    c["command_template"] = .string(command(entity.id, "{{ value | tojson }}"))
                } else {
                    c["device_class"] = "enum"
                }
            case .text(let max):
                c["max"] = .integer(Int64(max))
                c["value_template"] = .string("{{ \(read(entity.id)) if \(read(entity.id)) is not none else '' }}")
                c["command_template"] = .string(command(entity.id, "{{ value | tojson }}"))
            case .plain:
                break
            }
        case .light(let light):
            c["unique_id"] = .string("\(identifier(id))/~light")
            c["name"] = .null
            c["schema"] = "template"
            c["state_topic"] = state
            c["command_topic"] = commands
            let l = read(entity.id)
            func optional(_ key: String) -> String {
                "{{ \(l).\(key) if \(l).\(key) is not none else '' }}"
            }
            c["state_template"] = .string("{{ \(l).state }}")
            var on = "{\"\(entity.id)\":{\"state\":\"on\""
            if light.brightness != nil {
                c["brightness_template"] = .string(optional("brightness"))
                on += "{% if brightness is defined %},\"brightness\":{{ brightness }}{% endif %}"
            }
            if light.temperature != nil {
                c["color_temp_kelvin"] = true
                c["min_kelvin"] = .integer(Int64(HomeAssistantEntities.Light.minKelvin))
                c["max_kelvin"] = .integer(Int64(HomeAssistantEntities.Light.maxKelvin))
                c["color_temp_template"] = .string(optional("color_temp"))
                on += "{% if color_temp is defined %},\"color_temp\":{{ color_temp }}{% endif %}"
            }
            if light.colour != nil {
                c["red_template"] = .string(optional("r"))
                c["green_template"] = .string(optional("g"))
                c["blue_template"] = .string(optional("b"))
                on += "{% if hue is defined %},\"hue\":{{ hue }},\"sat\":{{ sat }}{% endif %}"
            }
            c["command_on_template"] = .string(on + "}}")
            c["command_off_template"] = .string("{\"\(entity.id)\":{\"state\":\"off\"}}")
        case .firmware:
            c["unique_id"] = .string("\(identifier(id))/~firmware")
            c["name"] = "Firmware"
            c["device_class"] = "firmware"
            c["entity_category"] = "config"
            c["state_topic"] = state
            c["value_template"] = .string("{{ \(read(entity.id)) | tojson }}")
            c["command_topic"] = commands
            c["payload_install"] = .string(command(entity.id, "\"install\""))
        case .wifiSignal, .rsrp:
            let wifi = entity.role == .wifiSignal
            c["unique_id"] = .string("\(identifier(id))/" + (wifi ? "~wifi_signal" : "~rsrp"))
            c["name"] = .string(wifi ? "Wi-Fi signal" : "LTE signal (RSRP)")
            c["device_class"] = "signal_strength"
            c["unit_of_measurement"] = "dBm"
            c["state_class"] = "measurement"
            c["entity_category"] = "diagnostic"
            c["state_topic"] = state
            c["value_template"] = .string(value)
        case .action(let name):
            c["unique_id"] = .string("\(identifier(id))/~action/\(name)")
            c["name"] = .string(HomeAssistantEntities.humanized(name))
            if name == "identify" { c["device_class"] = "identify" }
            c["entity_category"] = "config"
            c["command_topic"] = commands
            c["payload_press"] = .string(command(entity.id, "\"PRESS\""))
        }
        return c
    }

    private static func number(_ value: Double) -> JSONValue {
        if value.rounded() == value, abs(value) < 1e15 { return .integer(Int64(value)) }
        return .double(value)
    }

    // MARK: state

    /// The device's state as Home Assistant's templates read it: one key per entity, the value in Home
    /// Assistant's terms (scaled numbers, `ON`/`OFF`, option names), null while the device has not reported it.
    static func state(_ device: HomeAssistantDevice, entities: HomeAssistantEntities) -> JSONObject {
        var state = JSONObject()
        let snapshot = device.snapshot
        for entity in entities.entities {
            switch entity.role {
            case .property(let code, let spec, let shape):
                guard spec?.access != .wo else { continue }
                state[entity.id] = shown(snapshot.properties[code]?.value, spec: spec, shape: shape)
            case .light(let light):
                state[entity.id] = .object(lightState(light, snapshot.properties))
            case .firmware:
                state[entity.id] = .object(firmware(device))
            case .wifiSignal:
                let dBm = snapshot.wifiSignal.map { Int64($0.dBm) } ?? snapshot.info.wifiSignal.map(Int64.init)
                state[entity.id] = dBm.map(JSONValue.integer) ?? .null
            case .rsrp:
                let dBm = snapshot.rsrp.map { Int64($0.dBm) } ?? snapshot.info.rsrp.map(Int64.init)
                state[entity.id] = dBm.map(JSONValue.integer) ?? .null
            case .action:
                continue
            }
        }
        return state
    }

    /// A reported value as Home Assistant shows it.
    static func shown(_ value: JSONValue?, spec: PropertySpec?, shape: HomeAssistantEntities.Shape) -> JSONValue {
        guard let value, !value.isNull else { return .null }
        switch shape {
        case .toggle(let on, let off):
            if value == on || value.boolValue == true && on == .integer(1) { return "ON" }
            if value == off || value.boolValue == false && off == .integer(0) { return "OFF" }
            return .null
        case .number, .measurement:
            guard let number = value.doubleValue, number.isFinite else { return .null }
            let scale = spec?.scale ?? 0
            if scale == 0 { return value.int64Value.map(JSONValue.integer) ?? .double(number) }
            return .double(number / pow(10, Double(scale)))
        case .options(let options):
            if let match = options.first(where: { $0.value == value
                || ($0.value.int64Value != nil && $0.value.int64Value == value.int64Value) }) {
                return .string(match.name)
            }
            return .null
        case .text:
            return value.stringValue.map(JSONValue.string) ?? .null
        case .plain:
            switch value {
            case .string(let text): return .string(String(text.prefix(255)))
            case .integer, .double: return value
            case .bool(let on): return on ? "true" : "false"
            default: return .string(String(value.serialized().prefix(255)))
            }
        }
    }

    typealias Range = (code: String, min: Int64, max: Int64, step: Int64)

    /// A device range onto Home Assistant's (`lower...upper`) and back, rounded.
    static func toHA(_ raw: Int64, _ range: Range, lower: Int, upper: Int) -> Int {
        let fraction = Double(raw - range.min) / Double(range.max - range.min)
        return Swift.max(lower, Swift.min(upper, lower + Int((fraction * Double(upper - lower)).rounded())))
    }

    static func fromHA(_ value: Double, _ range: Range, lower: Int, upper: Int) -> Int64 {
        let fraction = Swift.max(0, Swift.min(1, (value - Double(lower)) / Double(upper - lower)))
        let raw = Double(range.min) + fraction * Double(range.max - range.min)
        let steps = ((raw - Double(range.min)) / Double(range.step)).rounded()
        return Swift.min(range.max, range.min + Int64(steps) * range.step)
    }

    static func lightState(_ light: HomeAssistantEntities.Light, _ properties: PropertyTable) -> JSONObject {
        let power = properties[light.power]?.value
        let on: JSONValue = power == nil ? .null
            : power == light.powerOn || power?.boolValue == true ? "on" : power == light.powerOff || power?.boolValue == false ? "off" : .null
        var state = JSONObject([("state", on)])
        if let range = light.brightness {
            state["brightness"] = properties[range.code]?.value.int64Value
                .map { .integer(Int64(toHA($0, range, lower: 1, upper: 255))) } ?? .null
        }
        if let range = light.temperature {
            state["color_temp"] = properties[range.code]?.value.int64Value.map {
                .integer(Int64(toHA($0, range, lower: HomeAssistantEntities.Light.minKelvin,
                                    upper: HomeAssistantEntities.Light.maxKelvin)))
            } ?? .null
        }
        if let colour = light.colour {
            var rgb: (Int, Int, Int)?
            if let text = properties[colour.code]?.value.stringValue,
               let hsv = try? JSONParser.parse(Array(text.utf8)), let h = hsv["h"]?.doubleValue,
               let s = hsv["s"]?.doubleValue {
                rgb = Self.rgb(hue: h, saturation: Swift.max(0, Swift.min(1, s / Double(colour.scale))))
            }
            state["r"] = rgb.map { .integer(Int64($0.0)) } ?? .null
            state["g"] = rgb.map { .integer(Int64($0.1)) } ?? .null
            state["b"] = rgb.map { .integer(Int64($0.2)) } ?? .null
        }
        return state
    }

    /// Full-value RGB of a hue (degrees) and saturation (0–1): Home Assistant reads the hue and saturation back
    /// from it; the brightness is the light's own.
    static func rgb(hue: Double, saturation: Double) -> (Int, Int, Int) {
        let h = (hue.truncatingRemainder(dividingBy: 360) + 360).truncatingRemainder(dividingBy: 360) / 60
        let c = saturation, x = c * (1 - abs(h.truncatingRemainder(dividingBy: 2) - 1)), m = 1 - c
        let (r, g, b): (Double, Double, Double) = switch Int(h) {
        case 0: (c, x, 0)
        case 1: (x, c, 0)
        case 2: (0, c, x)
        case 3: (0, x, c)
        case 4: (x, 0, c)
        default: (c, 0, x)
        }
        return (Int(((r + m) * 255).rounded()), Int(((g + m) * 255).rounded()), Int(((b + m) * 255).rounded()))
    }

    /// The update entity's state: the installed version, the catalog's, and a running upgrade's progress over its
    /// stages (downloading to 60 %, verifying to 70 %, flashing to 95 %, then the reboot).
    static func firmware(_ device: HomeAssistantDevice) -> JSONObject {
        var state = JSONObject()
        let installed = device.snapshot.info.firmwareVersion
        if let installed { state["installed_version"] = .string(installed) }
        if let latest = device.latest?.version ?? installed { state["latest_version"] = .string(latest) }
        if let title = device.model?.name { state["title"] = .string(title) }
        if let notes = device.latest?.notes { state["release_summary"] = .string(String(notes.prefix(255))) }
        if let upgrade = device.upgrade, upgrade.isRunning {
            let within = Double(Swift.max(0, Swift.min(100, upgrade.progress))) / 100
            let (from, span): (Double, Double) = switch upgrade.stage {
            case .accepted: (0, 0)
            case .downloading: (0, 60)
            case .verifying: (60, 10)
            case .flashing: (70, 25)
            default: (95, 4)
            }
            state["in_progress"] = true
            state["update_percentage"] = .integer(Int64((from + within * span).rounded()))
        } else {
            state["in_progress"] = false
            state["update_percentage"] = .null
        }
        return state
    }

    /// `online` unless the device is known to be offline; the agent's own status is the other half of every
    /// entity's availability.
    static func availability(_ snapshot: DeviceSnapshot) -> String {
        snapshot.online == false ? "offline" : "online"
    }

    // MARK: the agent's own device

    /// The agent's own Home Assistant device, holding a scene entity per scene (a press runs the agent's scene);
    /// nil when there is no scene.
    static func agentConfig(scenes: [String], topics: HomeAssistantTopics, removed: [String: String] = [:]) -> JSONObject? {
        var components = JSONObject()
        for name in scenes {
            components[HomeAssistantEntities.componentID("scene", name)] = .object(JSONObject([
                ("platform", "scene"), ("unique_id", .string("\(idPrefix)/scene/\(name)")), ("name", .string(name)),
                ("command_topic", .string(topics.sceneCommand)),
                ("payload_on", .string(JSONValue.object(JSONObject([("scene", .string(name))])).serialized())),
            ]))
        }
        for (componentID, platform) in removed.sorted(by: { $0.key < $1.key }) where components[componentID] == nil {
            components[componentID] = .object(JSONObject([("platform", .string(platform))]))
        }
        guard !components.isEmpty else { return nil }
        return JSONObject([
            ("device", .object(JSONObject([("identifiers", .array([.string("\(idPrefix)/agent/\(topics.topic)")])),
                                           ("name", "thing-agent"), ("manufacturer", "thing-agent"),
                                           ("model", "thing-agent scenes"),
                                           ("sw_version", .string(ThingAgentVersion.current))]))),
            ("origin", .object(origin)),
            ("availability", .array([availabilityEntry(topics.agentStatus, template: "{{ value_json.status }}")])),
            ("qos", 1),
            ("components", .object(components)),
        ])
    }

    /// The platform of each component in a config.
    static func platforms(_ config: JSONObject) -> [String: String] {
        var platforms: [String: String] = [:]
        for (id, component) in config["components"]?.objectValue ?? [:] where component.objectValue?.count ?? 0 > 1 {
            platforms[id] = component["platform"]?.stringValue
        }
        return platforms
    }
}
