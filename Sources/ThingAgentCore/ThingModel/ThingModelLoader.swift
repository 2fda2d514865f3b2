import FoundationEssentials
import JSON

/// The thing models known to the agent, by `productId`: one JSON file per product in a directory.
public struct ThingModels: Sendable {
    public private(set) var byProduct: [String: ThingModel]

    public init(_ models: [ThingModel] = []) {
        byProduct = Dictionary(models.map { ($0.productId, $0) }, uniquingKeysWith: { $1 })
    }

    public func model(for productId: String?) -> ThingModel? {
        productId.flatMap { byProduct[$0] }
    }

    /// A model file (or directory) that cannot be used: the file, the property, and why.
    public typealias LoadError = ConfigError

    /// Loads every `*.json` file of `directory`. A file that is not a valid model is an error naming it.
    public init(directory: String) throws(LoadError) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw LoadError(.thingModel, source: directory, "cannot read the directory")
        }
        var models: [ThingModel] = []
        var files: [String: String] = [:]
        for name in names.sorted() where name.hasSuffix(".json") {
            let path = directory + "/" + name
            let model = try Self.parse(try ConfigFile.bytes(path, .thingModel), file: path)
            if let other = files[model.productId] {
                throw LoadError(.thingModel, source: path, "product \(model.productId) is already defined by \(other)")
            }
            files[model.productId] = path
            models.append(model)
        }
        self.init(models)
    }

    /// Parses one model file's contents.
    public static func parse(_ bytes: [UInt8], file: String) throws(LoadError) -> ThingModel {
        func fail(_ reason: String) -> LoadError { LoadError(.thingModel, source: file, reason) }
        let root = try ConfigFile.json(bytes, .thingModel, source: file)
        if AlinkTSL.matches(root) { return try AlinkTSL.parse(root, fail: fail) }
        if TuyaModel.matches(root) { return try TuyaModel.parse(root, file: file, fail: fail) }
        guard let productId = root["productId"]?.stringValue, !productId.isEmpty else {
            throw fail("needs a 'productId' string")
        }
        guard let list = root["properties"]?.arrayValue else { throw fail("needs a 'properties' array") }
        let properties = try specs(list, what: "property", fail: fail)
        var actions: [ActionSpec]?
        if let list = root["actions"] {
            actions = []
            // Loops, not `map` with a typed-throws closure: this toolchain miscompiled that one (a crash at run time).
            for (code, entry) in try named(list, what: "action", fail: fail) {
                let inputs = try specs(entry["inputParams"]?.arrayValue ?? [], what: "\(code) parameter", fail: fail)
                let outputs = try specs(entry["outputParams"]?.arrayValue ?? [], what: "\(code) output", fail: fail)
                actions?.append(ActionSpec(name: code, inputs: inputs, outputs: outputs.map(\.code)))
            }
        }
        var events: [EventSpec]?
        if let list = root["events"] {
            events = []
            for (code, entry) in try named(list, what: "event", fail: fail) {
                let outputs = try specs(entry["outputParams"]?.arrayValue ?? [], what: "\(code) output", fail: fail)
                events?.append(EventSpec(name: code, outputs: outputs))
            }
        }
        for key in ["name", "manufacturer"] where root[key].map({ $0.stringValue == nil }) ?? false {
            throw fail("'\(key)' must be a string")
        }
        return ThingModel(productId: productId, properties: properties, actions: actions, events: events,
                          name: root["name"]?.stringValue, manufacturer: root["manufacturer"]?.stringValue)
    }

    /// `[{"code",...}]` of actions or events: each with a name by the action-name rule, none twice.
    private static func named(_ value: JSONValue, what: String, fail: (String) -> LoadError) throws(LoadError)
        -> [(String, JSONValue)] {
        guard let list = value.arrayValue else { throw fail("'\(what)s' must be an array") }
        var seen: Set<String> = []
        var named: [(String, JSONValue)] = []
        for entry in list {
            guard let code = entry["code"]?.stringValue, RequestKind.isActionName(code) else {
                throw fail("every \(what) needs a 'code' of letters, digits and _ (1 to 50)")
            }
            guard seen.insert(code).inserted else { throw fail("\(what) \(code) is listed twice") }
            named.append((code, entry))
        }
        return named
    }

    /// Properties, or an action's or event's parameters: `[{"code","type",...,"access"}]`.
    private static func specs(_ list: [JSONValue], what: String, fail: (String) -> LoadError) throws(LoadError)
        -> [PropertySpec] {
        var properties: [PropertySpec] = []
        for entry in list {
            guard let code = entry["code"]?.stringValue, !code.isEmpty else {
                throw fail("every \(what) needs a 'code'")
            }
            guard !properties.contains(where: { $0.code == code }) else { throw fail("\(code) is listed twice") }
            let accessText = entry["access"]?.stringValue ?? "rw"
            guard let access = PropertySpec.Access(rawValue: accessText) else {
                throw fail("\(code): access must be rw, ro or wo")
            }
            let kind: PropertySpec.Kind
            switch entry["type"]?.stringValue {
            case "bool": kind = .bool
            case "value":
                guard let min = entry["min"]?.int64Value, let max = entry["max"]?.int64Value, min <= max else {
                    throw fail("\(code): a value needs integer 'min' <= 'max'")
                }
                let step = entry["step"]?.int64Value
                if let step, step <= 0 { throw fail("\(code): 'step' must be positive") }
                kind = .value(min: min, max: max, step: step)
            case "decimal":
                guard let min = entry["min"]?.doubleValue, let max = entry["max"]?.doubleValue, min <= max else {
                    throw fail("\(code): a decimal needs numbers 'min' <= 'max'")
                }
                let step = entry["step"]?.doubleValue
                if let step, step <= 0 { throw fail("\(code): 'step' must be positive") }
                kind = .decimal(min: min, max: max, step: step)
            case "enum":
                guard let list = entry["range"]?.arrayValue, !list.isEmpty,
                      case let range = list.compactMap(\.stringValue), range.count == list.count else {
                    throw fail("\(code): an enum needs a non-empty 'range' of strings")
                }
                kind = .enumeration(range)
            case "string":
                guard let maxlen = entry["maxlen"]?.int64Value, maxlen > 0 else {
                    throw fail("\(code): a string needs a positive 'maxlen'")
                }
                kind = .string(maxlen: Int(maxlen))
            default:
                throw fail("\(code): type must be bool, value, decimal, enum or string")
            }
            // What people see (docs/protocol.md, "Thing models"): a name, a unit, and a number's scale.
            for key in ["name", "unit"] where entry[key].map({ $0.stringValue == nil }) ?? false {
                throw fail("\(code): '\(key)' must be a string")
            }
            var scale = 0
            if let value = entry["scale"] {
                guard let number = value.int64Value, (0...9).contains(number) else {
                    throw fail("\(code): 'scale' must be a whole number from 0 to 9")
                }
                switch kind {
                case .value, .decimal: scale = Int(number)
                default: throw fail("\(code): only a value or a decimal has a 'scale'")
                }
            }
            properties.append(PropertySpec(code: code, kind: kind, access: access, name: entry["name"]?.stringValue,
                                           unit: entry["unit"]?.stringValue, scale: scale))
        }
        return properties
    }
}
