import JSON

/// Thing models in Tuya's own model JSON, as Tuya IoT Core exports one and answers a TuyaLink device's
/// `thing/model/get` (`{"modelId","services":[{"properties","events","actions"}]}`, each item a `code`, an
/// `accessMode` and a `typeSpec`), read beside the agent's own in `modelsDirectory` (docs/protocol.md, "TuyaLink").
/// The product is the file's `productId` (or `pid`), else its name without `.json`: Tuya's model names none.
///
/// Types map one to one onto the agent's, which follow Tuya's data points: `bool`, `value` (`min`, `max`, `step`,
/// `scale`, `unit`), `enum` (`range`), `string` (`maxlen`). `date`, `bitmap`, `raw`, `struct` and `array` are left
/// out of the model, so a set of one is refused as unknown. `accessMode` `ro` is read-only, `wr` write-only.
enum TuyaModel {
    /// Whether `root` is Tuya's model rather than the agent's own (whose `properties` are at the top).
    static func matches(_ root: JSONValue) -> Bool {
        root["services"]?.arrayValue != nil && root["properties"] == nil
    }

    static func parse(_ root: JSONValue, file: String, fail: (String) -> ConfigError) throws(ConfigError) -> ThingModel {
        let named = root["productId"]?.stringValue ?? root["pid"]?.stringValue
        let base = file.split(separator: "/").last.map { $0.hasSuffix(".json") ? String($0.dropLast(5)) : String($0) }
        guard let productId = named ?? base, !productId.isEmpty else { throw fail("a Tuya model needs a 'productId'") }
        var properties: [PropertySpec] = [], actions: [ActionSpec] = [], events: [EventSpec] = []
        for service in root["services"]?.arrayValue ?? [] {
            for property in try specs(service["properties"], what: "property", fail: fail)
            where !properties.contains(where: { $0.code == property.code }) {
                properties.append(property)
            }
            for entry in service["actions"]?.arrayValue ?? [] {
                guard let code = entry["code"]?.stringValue, RequestKind.isActionName(code) else {
                    throw fail("every action needs a 'code' of letters, digits and _ (1 to 50)")
                }
                let inputs = try specs(entry["inputParams"], what: "\(code) parameter", fail: fail)
                // Only the names of the outputs are kept (nothing checks a device's answer).
                let outputs = (entry["outputParams"]?.arrayValue ?? []).compactMap { $0["code"]?.stringValue }
                actions.append(ActionSpec(name: code, inputs: inputs, outputs: outputs))
            }
            for entry in service["events"]?.arrayValue ?? [] {
                guard let code = entry["code"]?.stringValue, RequestKind.isActionName(code) else {
                    throw fail("every event needs a 'code' of letters, digits and _ (1 to 50)")
                }
                events.append(EventSpec(name: code, outputs: try specs(entry["outputParams"], what: "\(code) output",
                                                                       fail: fail)))
            }
        }
        return ThingModel(productId: productId, properties: properties, actions: actions, events: events,
                          name: root["name"]?.stringValue)
    }

    /// Properties, or an action's or event's parameters: `[{"code","accessMode","typeSpec"}]`.
    private static func specs(_ value: JSONValue?, what: String, fail: (String) -> ConfigError) throws(ConfigError)
        -> [PropertySpec] {
        var specs: [PropertySpec] = []
        for entry in value?.arrayValue ?? [] {
            guard let code = entry["code"]?.stringValue, !code.isEmpty, code.utf8.count <= 64 else {
                throw fail("every \(what) needs a 'code' of 1 to 64 bytes")
            }
            guard !specs.contains(where: { $0.code == code }) else { throw fail("\(code) is listed twice") }
            let access: PropertySpec.Access
            switch entry["accessMode"]?.stringValue ?? "rw" {
            case "rw": access = .rw
            case "ro": access = .ro
            case "wr", "wo": access = .wo
            default: throw fail("\(code): accessMode must be rw, ro or wr")
            }
            let type = entry["typeSpec"]
            let kind: PropertySpec.Kind
            var scale = 0
            switch type?["type"]?.stringValue {
            case "bool":
                kind = .bool
            case "value":
                guard let min = type?["min"]?.int64Value, let max = type?["max"]?.int64Value, min <= max else {
                    throw fail("\(code): a value needs whole 'min' <= 'max' in its typeSpec")
                }
                let step = type?["step"]?.int64Value.flatMap { $0 > 0 ? $0 : nil }
                kind = .value(min: min, max: max, step: step)
                scale = Int(type?["scale"]?.int64Value ?? 0)
                guard (0...9).contains(scale) else { throw fail("\(code): 'scale' must be 0 to 9") }
            case "enum":
                let range = type?["range"]?.arrayValue?.compactMap(\.stringValue) ?? []
                guard !range.isEmpty, range.count == type?["range"]?.arrayValue?.count else {
                    throw fail("\(code): an enum needs a non-empty 'range' of strings")
                }
                kind = .enumeration(range)
            case "string":
                let maxlen = type?["maxlen"]?.int64Value ?? 255
                guard maxlen > 0 else { throw fail("\(code): a string needs a positive 'maxlen'") }
                kind = .string(maxlen: Int(maxlen))
            case "date", "bitmap", "raw", "struct", "array":
                continue
            default:
                throw fail("\(code): type must be bool, value, enum, string, date, bitmap, raw, struct or array")
            }
            let unit = type?["unit"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
            specs.append(PropertySpec(code: code, kind: kind, access: access, name: entry["name"]?.stringValue,
                                      unit: unit, scale: scale))
        }
        return specs
    }

    // MARK: rendering

    /// `model` as Tuya's model JSON in its `simple` format (no names or descriptions): the answer to a TuyaLink
    /// device's `thing/model/get`, whatever form the model was read from.
    package static func json(_ model: ThingModel) -> JSONObject {
        var service = JSONObject([("code", .string("")), ("properties", .array(model.properties.map(property)))])
        if let events = model.events {
            service["events"] = .array(events.map { event in
                .object(JSONObject([("code", .string(event.name)), ("outputParams", .array(event.outputs.map(property)))]))
            })
        }
        if let actions = model.actions {
            service["actions"] = .array(actions.map { action in
                .object(JSONObject([("code", .string(action.name)), ("inputParams", .array(action.inputs.map(property))),
                                    ("outputParams", .array(action.outputs.map { .object(["code": .string($0)]) }))]))
            })
        }
        return JSONObject([("modelId", .string(model.productId)), ("services", .array([.object(service)]))])
    }

    private static func property(_ spec: PropertySpec) -> JSONValue {
        var type: JSONObject
        switch spec.kind {
        case .bool:
            type = JSONObject([("type", .string("bool"))])
        case .value(let min, let max, let step):
            type = JSONObject([("type", .string("value")), ("min", .integer(min)), ("max", .integer(max)),
                               ("step", .integer(step ?? 1)), ("scale", .integer(Int64(spec.scale)))])
        case .decimal(let min, let max, let step):
            // Tuya's values are whole numbers: a decimal is described by its bounds as they are.
            type = JSONObject([("type", .string("value")), ("min", .double(min)), ("max", .double(max))])
            if let step { type["step"] = .double(step) }
        case .enumeration(let range):
            type = JSONObject([("type", .string("enum")), ("range", .array(range.map(JSONValue.string)))])
        case .string(let maxlen):
            type = JSONObject([("type", .string("string")), ("maxlen", .integer(Int64(maxlen)))])
        }
        if let unit = spec.unit { type["unit"] = .string(unit) }
        let access = switch spec.access { case .rw: "rw"; case .ro: "ro"; case .wo: "wr" }
        return .object(JSONObject([("code", .string(spec.code)), ("accessMode", .string(access)), ("typeSpec", .object(type))]))
    }
}
