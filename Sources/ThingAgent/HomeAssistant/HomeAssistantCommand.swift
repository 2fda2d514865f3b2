import FoundationEssentials
import Glibc
import JSON
import ThingAgentCore

/// What a command from Home Assistant asks, read against the device's entities: a property set (values in the
/// device's terms, unscaled), an action, a firmware install. A payload that is not what the discovery config has
/// Home Assistant send is refused with the reason, never half-done.
enum HomeAssistantCommand: Sendable, Equatable {
    case set([String: JSONValue])
    case action(String)
    case install

    struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The largest command read (Home Assistant's are a few dozen bytes).
    static let maxPayload = 4096

    /// Reads `{"<component id>":<value>,...}` against `entities` (`properties` for a light's current colour).
    static func read(_ payload: [UInt8], entities: HomeAssistantEntities,
                     properties: PropertyTable) throws(Refusal) -> [HomeAssistantCommand] {
        guard payload.count <= maxPayload else { throw Refusal("a command of \(payload.count) bytes (at most \(maxPayload))") }
        let root: JSONValue
        do {
            root = try JSONParser.parse(payload)
        } catch {
            throw Refusal("not JSON: \(error)")
        }
        guard let object = root.objectValue, !object.isEmpty else { throw Refusal("not a JSON object of entities and values") }
        var values: [String: JSONValue] = [:]
        var commands: [HomeAssistantCommand] = []
        for (key, value) in object {
            guard let entity = entities.entity(key) else { throw Refusal("no entity '\(key.prefix(80))' on this device") }
            switch entity.role {
            case .property(let code, let spec, let shape):
                guard let spec, spec.access != .ro else { throw Refusal("\(code) cannot be set from Home Assistant") }
                values[code] = try deviceValue(value, spec: spec, shape: shape)
            case .light(let light):
                guard let request = value.objectValue else { throw Refusal("a light takes an object") }
                for (code, value) in try lightValues(request, light, properties) { values[code] = value }
            case .firmware:
                guard value == "install" else { throw Refusal("firmware takes \"install\"") }
                commands.append(.install)
            case .action(let name):
                guard value == "PRESS" else { throw Refusal("an action takes \"PRESS\"") }
                commands.append(.action(name))
            case .wifiSignal, .rsrp:
                throw Refusal("\(key) cannot be set")
            }
        }
        if !values.isEmpty { commands.insert(.set(values), at: 0) }
        return commands
    }

    /// Home Assistant's value (`ON`, 23.5, an option's name) as the device takes it.
    static func deviceValue(_ value: JSONValue, spec: PropertySpec,
                            shape: HomeAssistantEntities.Shape) throws(Refusal) -> JSONValue {
        switch shape {
        case .toggle(let on, let off):
            switch value.stringValue {
            case "ON": return on
            case "OFF": return off
            default: throw Refusal("\(spec.code) takes \"ON\" or \"OFF\", got \(value.serialized().prefix(80))")
            }
        case .number:
            var number = value.doubleValue
            if let text = value.stringValue { number = Double(text) }
            guard let number, number.isFinite else {
                throw Refusal("\(spec.code) takes a number, got \(value.serialized().prefix(80))")
            }
            let raw = number * pow(10, Double(spec.scale))
            if case .decimal = spec.kind { return .double(raw) }
            guard abs(raw) < 9e18 else { throw Refusal("\(spec.code): \(number) is out of range") }
            return .integer(Int64(raw.rounded()))
        case .options(let options):
            guard let name = value.stringValue, let option = options.first(where: { $0.name == name }) else {
                throw Refusal("\(spec.code) takes one of \(options.map(\.name).joined(separator: ", ")), "
                              + "got \(value.serialized().prefix(80))")
            }
            return option.value
        case .text:
            guard let text = value.stringValue else { throw Refusal("\(spec.code) takes text") }
            return .string(text)
        case .measurement, .plain:
            throw Refusal("\(spec.code) cannot be set from Home Assistant")
        }
    }

    /// A light's command (`{"state":"on","brightness":128,"color_temp":4000,"hue":30,"sat":80}`) as one set.
    static func lightValues(_ request: JSONObject, _ light: HomeAssistantEntities.Light,
                            _ properties: PropertyTable) throws(Refusal) -> [String: JSONValue] {
        var values: [String: JSONValue] = [:]
        switch request["state"]?.stringValue {
        case "off":
            values[light.power] = light.powerOff
            return values
        case "on":
            values[light.power] = light.powerOn
        default:
            throw Refusal("a light command needs \"state\": \"on\" or \"off\"")
        }
        func number(_ key: String, _ range: ClosedRange<Double>) throws(Refusal) -> Double? {
            guard let raw = request[key] else { return nil }
            guard let value = raw.doubleValue, value.isFinite, range.contains(value) else {
                throw Refusal("a light's \(key) must be a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return value
        }
        let brightness = try number("brightness", 0...255)
        if let brightness, let range = light.brightness {
            values[range.code] = .integer(HomeAssistantDiscovery.fromHA(Swift.max(1, brightness), range, lower: 1, upper: 255))
        }
        if let kelvin = try number("color_temp", 1000...40000), let range = light.temperature {
            values[range.code] = .integer(HomeAssistantDiscovery.fromHA(
                kelvin, range, lower: HomeAssistantEntities.Light.minKelvin, upper: HomeAssistantEntities.Light.maxKelvin))
            if let mode = light.mode { values[mode.code] = .string(mode.white) }
        }
        if let hue = try number("hue", 0...360), let colour = light.colour {
            let saturation = try number("sat", 0...100) ?? 100
            let scale = Double(colour.scale)
            var level = scale
            if let brightness { level = (brightness / 255 * scale).rounded() }
            else if let text = properties[colour.code]?.value.stringValue,
                    let current = try? JSONParser.parse(Array(text.utf8)), let v = current["v"]?.doubleValue { level = v }
            let hsv = JSONObject([("h", .integer(Int64(hue.rounded()))),
                                  ("s", .integer(Int64((saturation / 100 * scale).rounded()))),
                                  ("v", .integer(Int64(level)))])
            values[colour.code] = .string(JSONValue.object(hsv).serialized())
            if let mode = light.mode { values[mode.code] = .string(mode.colour) }
        }
        return values
    }
}
