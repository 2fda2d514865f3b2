import FoundationEssentials
import Glibc
import JSON
import Platform

/// Thing models in Alink's TSL, the JSON Alibaba Cloud's IoT Platform exports for a product
/// (`{"profile":{"productKey"},"properties":[{"identifier","accessMode","dataType":{"type","specs"}}],...}`), read
/// beside the agent's own in `modelsDirectory` (docs/protocol.md, "Alink"). Its product is the product key.
///
/// The types become the agent's: `int` a value with `min`, `max`, `step`; `float` and `double` a decimal; `bool` a
/// value 0 or 1 (Alink sends and takes booleans as 0/1); `enum` a value from the smallest to the largest key (its
/// keys are numbers on the wire); `text` a string of `length`. `date`, `struct` and `array` properties are left
/// out of the model, so a set of one is refused as unknown. `accessMode` `r` is read-only. Services are the
/// model's actions (`inputData` their parameters, of the same types), events its events (`outputData`); the
/// property services and event (`set`, `get`, `post`) are left out.
enum AlinkTSL {
    /// Whether `root` is a TSL document rather than the agent's own model.
    static func matches(_ root: JSONValue) -> Bool {
        root["profile"]?.objectValue != nil || root["schema"]?.stringValue?.contains("tsl") == true
    }

    static func parse(_ root: JSONValue, fail: (String) -> ConfigError) throws(ConfigError) -> ThingModel {
        guard let productKey = root["profile"]?["productKey"]?.stringValue, !productKey.isEmpty else {
            throw fail("a TSL model needs 'profile.productKey'")
        }
        let properties = try specs(root["properties"]?.arrayValue ?? [], what: "property", fail: fail)
        var actions: [ActionSpec] = []
        for entry in root["services"]?.arrayValue ?? [] {
            guard let name = entry["identifier"]?.stringValue else { throw fail("every TSL service needs an 'identifier'") }
            guard name != "set", name != "get" else { continue }
            guard AlinkDialect.isIdentifier(name) else { throw fail("service '\(name.prefix(80))' is no identifier") }
            let outputs = try specs(entry["outputData"]?.arrayValue ?? [], what: "\(name) output", fail: fail)
            actions.append(ActionSpec(name: name, inputs: try specs(entry["inputData"]?.arrayValue ?? [],
                                                                    what: "\(name) parameter", fail: fail),
                                      outputs: outputs.map(\.code)))
        }
        var events: [EventSpec] = []
        for entry in root["events"]?.arrayValue ?? [] {
            guard let name = entry["identifier"]?.stringValue else { throw fail("every TSL event needs an 'identifier'") }
            guard name != "post" else { continue }
            events.append(EventSpec(name: name, outputs: try specs(entry["outputData"]?.arrayValue ?? [],
                                                                   what: "\(name) output", fail: fail)))
        }
        return ThingModel(productId: productKey, properties: properties,
                          actions: root["services"] == nil ? nil : actions, events: root["events"] == nil ? nil : events)
    }

    /// Properties, or a service's or event's parameters: `[{"identifier","accessMode","dataType"}]`.
    private static func specs(_ list: [JSONValue], what: String, fail: (String) -> ConfigError) throws(ConfigError)
        -> [PropertySpec] {
        var properties: [PropertySpec] = []
        for entry in list {
            guard let code = entry["identifier"]?.stringValue, !code.isEmpty else {
                throw fail("every TSL \(what) needs an 'identifier'")
            }
            guard !properties.contains(where: { $0.code == code }) else { throw fail("\(code) is listed twice") }
            let access: PropertySpec.Access = entry["accessMode"]?.stringValue == "r" ? .ro : .rw
            let specs = entry["dataType"]?["specs"]
            func number(_ key: String) -> Double? {
                specs?[key]?.stringValue.flatMap(Double.init) ?? specs?[key]?.doubleValue
            }
            let kind: PropertySpec.Kind
            var names: [PropertySpec.ValueName] = []
            var isBool = false
            switch entry["dataType"]?["type"]?.stringValue {
            case "int":
                guard let min = number("min").flatMap({ Int64(exactly: $0) }),
                      let max = number("max").flatMap({ Int64(exactly: $0) }), min <= max else {
                    throw fail("\(code): an int needs whole 'min' <= 'max' in its specs")
                }
                let step = number("step").flatMap { Int64(exactly: $0) }.flatMap { $0 > 0 ? $0 : nil }
                kind = .value(min: min, max: max, step: step)
            case "float", "double":
                guard let min = number("min"), let max = number("max"), min <= max else {
                    throw fail("\(code): a \(entry["dataType"]?["type"]?.stringValue ?? "") needs 'min' <= 'max'")
                }
                kind = .decimal(min: min, max: max, step: number("step").flatMap { $0 > 0 ? $0 : nil })
            case "bool":
                kind = .value(min: 0, max: 1, step: 1)
                isBool = true
                names = valueNames(specs)
            case "enum":
                let keys = (specs?.objectValue.map { Array($0.keys) } ?? []).compactMap { Int64($0) }
                guard let min = keys.min(), let max = keys.max() else { throw fail("\(code): an enum needs number keys") }
                kind = .value(min: min, max: max, step: 1)
                names = valueNames(specs)
            case "text":
                guard let length = number("length").flatMap({ Int(exactly: $0) }), length > 0 else {
                    throw fail("\(code): a text needs a positive 'length'")
                }
                kind = .string(maxlen: length)
            case "date", "struct", "array":
                continue
            default:
                throw fail("\(code): type must be int, float, double, bool, enum, text, date, struct or array")
            }
            let (unit, scale) = unitAndScale(specs?["unit"]?.stringValue)
            properties.append(PropertySpec(code: code, kind: kind, access: access, name: entry["name"]?.stringValue,
                                           unit: unit, scale: scale, valueNames: names, isNumericBool: isBool))
        }
        return properties
    }

    /// A `bool`'s or `enum`'s specs, `{"0":"off","1":"on"}`, as names of numbers in number order.
    private static func valueNames(_ specs: JSONValue?) -> [PropertySpec.ValueName] {
        (specs?.objectValue.map { Array($0) } ?? []).compactMap { key, value in
            guard let number = Int64(key), let name = value.stringValue, !name.isEmpty else { return nil }
            return PropertySpec.ValueName(value: number, name: name)
        }.sorted { $0.value < $1.value }
    }

    /// A TSL unit, which may carry the resolution before it (`0.1 °C`: the number is tenths of a degree): the unit
    /// and the scale. A unit of nothing but spaces is none.
    static func unitAndScale(_ text: String?) -> (String?, Int) {
        guard let text = text?.trimmingBlanks(), !text.isEmpty else { return (nil, 0) }
        let parts = text.split(separator: " ", maxSplits: 1)
        if parts.count == 2, let factor = Double(parts[0]), factor > 0, factor < 1 {
            let scale = Int((-log10(factor)).rounded())
            if (1...9).contains(scale), abs(pow(10, -Double(scale)) - factor) < 1e-12 {
                return (String(parts[1]).trimmingBlanks(), scale)
            }
        }
        return (text, 0)
    }
}
