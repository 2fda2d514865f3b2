import FoundationEssentials
import Glibc
import JSON
import ThingAgentCore

/// What one agent device is in Home Assistant: its entities, worked out from the thing model and what the device
/// reported (docs/home-assistant.md, "What maps to what"). Pure: the same inputs give the same entities, so the
/// discovery config, the state and the reading of a command all come from one list.
struct HomeAssistantEntities: Sendable, Equatable {
    /// One entity: its component id in the device's discovery config (also its key in the state), its platform,
    /// and what it stands for.
    struct Entity: Sendable, Equatable {
        var id: String
        var platform: String
        var role: Role
    }

    enum Role: Sendable, Equatable {
        case property(code: String, spec: PropertySpec?, shape: Shape)
        case light(Light)
        case firmware
        case wifiSignal
        case rsrp
        case action(name: String)
    }

    /// How a property shows.
    enum Shape: Sendable, Equatable {
        /// `on` and `off` are the values sent and reported (`true`/`false`, or an Alink bool's 1 and 0).
        case toggle(on: JSONValue, off: JSONValue)
        case number(min: Double, max: Double, step: Double)
        case measurement(unit: String?, deviceClass: String?, stateClass: String?)
        /// Options as shown, each with the value sent and reported.
        case options([(name: String, value: JSONValue)])
        case text(max: Int)
        /// A code no rule knows: its value as text (JSON for objects and arrays).
        case plain

        static func == (lhs: Shape, rhs: Shape) -> Bool {
            switch (lhs, rhs) {
            case let (.toggle(a, b), .toggle(c, d)): a == c && b == d
            case let (.number(a, b, c), .number(d, e, f)): a == d && b == e && c == f
            case let (.measurement(a, b, c), .measurement(d, e, f)): a == d && b == e && c == f
            case let (.options(a), .options(b)): a.map(\.name) == b.map(\.name) && a.map(\.value) == b.map(\.value)
            case let (.text(a), .text(b)): a == b
            case (.plain, .plain): true
            default: false
            }
        }
    }

    /// A light: its switch and what else of it the model has, each with the scale Home Assistant's is mapped to.
    struct Light: Sendable, Equatable {
        var power: String
        var powerOn: JSONValue
        var powerOff: JSONValue
        /// Brightness code and its range (Home Assistant's 1–255 maps onto it).
        var brightness: (code: String, min: Int64, max: Int64, step: Int64)?
        /// Colour temperature code and its range, warm (min) to cold (max), mapped onto 2700–6500 K.
        var temperature: (code: String, min: Int64, max: Int64, step: Int64)?
        /// Colour code (TuyaLink's HSV JSON text `{"h":0-360,"s":…,"v":…}`) and the top of its `s` and `v`.
        var colour: (code: String, scale: Int)?
        /// The work-mode enum and its white and colour values, set with a colour temperature or a colour.
        var mode: (code: String, white: String, colour: String)?

        static func == (lhs: Light, rhs: Light) -> Bool {
            lhs.power == rhs.power && lhs.powerOn == rhs.powerOn && lhs.powerOff == rhs.powerOff
                && lhs.brightness.map { [$0.code, "\($0.min)", "\($0.max)", "\($0.step)"] }
                == rhs.brightness.map { [$0.code, "\($0.min)", "\($0.max)", "\($0.step)"] }
                && lhs.temperature.map { [$0.code, "\($0.min)", "\($0.max)", "\($0.step)"] }
                == rhs.temperature.map { [$0.code, "\($0.min)", "\($0.max)", "\($0.step)"] }
                && lhs.colour.map { [$0.code, "\($0.scale)"] } == rhs.colour.map { [$0.code, "\($0.scale)"] }
                && lhs.mode.map { [$0.code, $0.white, $0.colour] } == rhs.mode.map { [$0.code, $0.white, $0.colour] }
        }

        static let minKelvin = 2700
        static let maxKelvin = 6500

        /// The codes the light takes in: none of them is an entity of its own.
        var codes: Set<String> {
            Set([power, brightness?.code, temperature?.code, colour?.code, mode?.code].compactMap { $0 })
        }
    }

    var entities: [Entity]

    /// The device's entities: its thing model's properties (a light pattern as one light), every reported code the
    /// model does not know, the Wi-Fi and LTE signal, the firmware, and the model's actions.
    init(snapshot: DeviceSnapshot, model: ThingModel?, hasFirmware: Bool) {
        var entities: [Entity] = []
        let specs = model?.properties ?? []
        let light = Self.light(specs)
        if let light { entities.append(Entity(id: "light", platform: "light", role: .light(light))) }
        let taken = light?.codes ?? []
        var known = Set<String>()
        for spec in specs {
            known.insert(spec.code)
            guard !taken.contains(spec.code) else { continue }
            let (platform, shape) = Self.shape(spec)
            entities.append(Entity(id: Self.componentID(platform, spec.code), platform: platform,
                                   role: .property(code: spec.code, spec: spec, shape: shape)))
        }
        // Never dropped: what the device reports beyond its model (or with no model at all) shows as it is.
        for (code, value) in snapshot.properties where !known.contains(code) {
            let (platform, shape) = Self.unknownShape(code, value.value)
            entities.append(Entity(id: Self.componentID(platform, code), platform: platform,
                                   role: .property(code: code, spec: nil, shape: shape)))
        }
        if snapshot.wifiSignal != nil || snapshot.info.wifiSignal != nil {
            entities.append(Entity(id: "wifi_signal", platform: "sensor", role: .wifiSignal))
        }
        if snapshot.rsrp != nil || snapshot.info.rsrp != nil {
            entities.append(Entity(id: "rsrp", platform: "sensor", role: .rsrp))
        }
        if hasFirmware { entities.append(Entity(id: "firmware", platform: "update", role: .firmware)) }
        for action in model?.actions ?? [] {
            entities.append(Entity(id: Self.componentID("button", action.name), platform: "button",
                                   role: .action(name: action.name)))
        }
        self.entities = entities
    }

    func entity(_ id: String) -> Entity? { entities.first { $0.id == id } }

    // MARK: rules

    /// `<platform>:<code>`, the code's bytes outside `A-Z a-z 0-9 _ . -` written `%XX` (Home Assistant splits
    /// discovery ids at spaces, and the id is quoted in templates). A platform of its own in the id: a code whose
    /// entity changes platform is a new component, and the old one is removed by name.
    static func componentID(_ platform: String, _ code: String) -> String {
        var out = platform + ":"
        for byte in code.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + HomeAssistantTopics.hex(byte)
            }
        }
        return out
    }

    static let lightSwitches = ["switch_led", "switch_led_1", "switch_1", "switch"]
    static let brightnessCodes = ["bright_value", "bright_value_v2", "bright_value_1", "brightness"]
    static let temperatureCodes = ["temp_value", "temp_value_v2", "colour_temp"]
    static let colourCodes = ["colour_data_v2", "colour_data"]
    static let modeCodes = ["work_mode", "mode"]

    /// A writable switch with a writable brightness, colour temperature or colour: one light.
    static func light(_ specs: [PropertySpec]) -> Light? {
        func writable(_ code: String) -> PropertySpec? {
            specs.first { $0.code == code && $0.access == .rw }
        }
        func range(_ codes: [String]) -> (code: String, min: Int64, max: Int64, step: Int64)? {
            for code in codes {
                if let spec = writable(code), !spec.isNumericBool, case .value(let min, let max, let step) = spec.kind,
                   max > min { return (code, min, max, step ?? 1) }
            }
            return nil
        }
        guard let (power, on, off) = lightSwitches.lazy.compactMap({ code -> (String, JSONValue, JSONValue)? in
            guard let spec = writable(code) else { return nil }
            if case .bool = spec.kind { return (code, .bool(true), .bool(false)) }
            if spec.isNumericBool { return (code, .integer(1), .integer(0)) }
            return nil
        }).first else { return nil }
        let brightness = range(brightnessCodes)
        let temperature = range(temperatureCodes)
        var colour: (code: String, scale: Int)?
        for code in colourCodes {
            if let spec = writable(code), case .string = spec.kind {
                colour = (code, code.hasSuffix("_v2") ? 1000 : 255)
                break
            }
        }
        guard brightness != nil || temperature != nil || colour != nil else { return nil }
        var mode: (code: String, white: String, colour: String)?
        for code in modeCodes {
            if let spec = writable(code), case .enumeration(let range) = spec.kind, range.contains("white"),
               range.contains("colour") {
                mode = (code, "white", "colour")
                break
            }
        }
        // A mode is set with the light only when the light has both a temperature and a colour to choose between.
        if temperature == nil || colour == nil { mode = nil }
        return Light(power: power, powerOn: on, powerOff: off, brightness: brightness, temperature: temperature,
                     colour: colour, mode: mode)
    }

    /// A property's platform and shape, by its type and access.
    static func shape(_ spec: PropertySpec) -> (String, Shape) {
        let writable = spec.access != .ro
        if spec.isNumericBool || spec.kind == .bool {
            let (on, off): (JSONValue, JSONValue) = spec.isNumericBool ? (.integer(1), .integer(0)) : (.bool(true), .bool(false))
            return (writable ? "switch" : "binary_sensor", .toggle(on: on, off: off))
        }
        if !spec.valueNames.isEmpty {
            let options = spec.valueNames.map { (name: $0.name, value: JSONValue.integer($0.value)) }
            return (writable ? "select" : "sensor", .options(options))
        }
        switch spec.kind {
        case .bool:
            return ("switch", .toggle(on: .bool(true), off: .bool(false)))
        case .value(let min, let max, let step):
            let factor = pow(10, Double(spec.scale))
            if writable {
                return ("number", .number(min: Double(min) / factor, max: Double(max) / factor,
                                          step: Double(step ?? 1) / factor))
            }
            return ("sensor", measurement(spec))
        case .decimal(let min, let max, let step):
            let factor = pow(10, Double(spec.scale))
            if writable {
                let fallback = spec.scale > 0 ? 1 / factor : max - min > 100 ? 1 : 0.1
                return ("number", .number(min: min / factor, max: max / factor, step: (step.map { $0 / factor }) ?? fallback))
            }
            return ("sensor", measurement(spec))
        case .enumeration(let range):
            return (writable ? "select" : "sensor", .options(range.map { (name: $0, value: JSONValue.string($0)) }))
        case .string(let maxlen):
            return (writable ? "text" : "sensor", writable ? .text(max: Swift.min(maxlen, 255)) : .plain)
        }
    }

    /// A code the model does not name, by the JSON type of what the device reported.
    static func unknownShape(_ code: String, _ value: JSONValue) -> (String, Shape) {
        switch value {
        case .bool: ("binary_sensor", .toggle(on: .bool(true), off: .bool(false)))
        case .integer, .double: ("sensor", .measurement(unit: nil, deviceClass: nil, stateClass: "measurement"))
        default: ("sensor", .plain)
        }
    }

    /// The device classes a code or a unit says, each with the units Home Assistant takes for it (the first is
    /// the one a code alone implies).
    static let deviceClasses: [(deviceClass: String, units: [String], codes: @Sendable (String) -> Bool)] = [
        ("temperature", ["°C", "°F", "K"], { code in
            code == "temperature" || code == "temp_current" || code.hasPrefix("va_temp") || code.hasSuffix("_temperature")
                || (code.hasPrefix("temp_") && !code.hasPrefix("temp_value"))
        }),
        ("humidity", ["%"], { $0.contains("humidity") }),
        ("battery", ["%"], { $0.contains("battery") }),
        ("power", ["W", "kW"], { $0 == "power" || $0 == "cur_power" || $0.hasSuffix("_power") }),
        ("energy", ["kWh", "Wh", "MWh"], { $0.contains("energy") || $0 == "add_ele" }),
        ("voltage", ["V", "mV"], { $0.contains("voltage") }),
        ("current", ["A", "mA"], { $0 == "current" || $0 == "cur_current" || $0.contains("electric_current") }),
        ("illuminance", ["lx"], { $0.contains("illuminance") || $0.contains("lux") }),
        ("signal_strength", ["dBm", "dB"], { $0.contains("rssi") }),
        ("duration", ["s", "min", "h", "d", "ms"], { _ in false }),
    ]

    /// A read-only number: its unit, and the device class and state class its code or unit says. A device class
    /// goes only with a unit Home Assistant takes for it; a code that says one with no unit in the model takes the
    /// class's usual unit (°C, %, W, kWh, V, mA, lx).
    static func measurement(_ spec: PropertySpec) -> Shape {
        let code = spec.code.lowercased()
        var unit = spec.unit.map { $0 == "℃" ? "°C" : $0 == "℉" ? "°F" : $0 }
        var deviceClass: String?
        if let byCode = deviceClasses.first(where: { $0.codes(code) }) {
            if unit == nil {
                unit = byCode.deviceClass == "current" ? "mA" : byCode.units[0]
            }
            if let unit, byCode.units.contains(unit) { deviceClass = byCode.deviceClass }
        } else if let unit, unit != "%", let byUnit = deviceClasses.first(where: { $0.units.contains(unit) }) {
            deviceClass = byUnit.deviceClass
        }
        let stateClass = deviceClass == "energy" ? "total_increasing" : "measurement"
        return .measurement(unit: unit, deviceClass: deviceClass, stateClass: stateClass)
    }

    /// A writable number's unit and device class (Home Assistant's number classes are the sensor's).
    static func numberUnit(_ spec: PropertySpec) -> (unit: String?, deviceClass: String?) {
        guard case .measurement(let unit, let deviceClass, _) = measurement(spec) else { return (spec.unit, nil) }
        // A writable number whose code says nothing keeps the model's unit alone.
        return (spec.unit == nil && deviceClass == nil ? nil : unit, deviceClass)
    }

    /// `bright_value` → `Bright value`.
    static func humanized(_ code: String) -> String {
        let words = code.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." }).joined(separator: " ")
        guard let first = words.first else { return code }
        return first.uppercased() + words.dropFirst()
    }
}
