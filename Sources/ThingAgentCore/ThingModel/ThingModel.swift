import JSON

/// A product's thing model: the properties a device of that product has and which may be set (docs/protocol.md,
/// "Thing models"). Types follow the vendor platforms' data points.
public struct ThingModel: Sendable, Equatable {
    public var productId: String
    public var properties: [PropertySpec]
    /// The actions (Alink services) a device of the product takes; nil when the model does not describe them
    /// (an action is then sent unchecked, and the device answers for it).
    public var actions: [ActionSpec]?
    /// The events a device of the product reports; nil when the model does not describe them. Events are kept
    /// whatever the model says (a device's word is never dropped for a model's sake).
    public var events: [EventSpec]?
    /// The product's name for people (the model file's `name`); nothing checks it.
    public var name: String?
    /// Who makes the product (the model file's `manufacturer`); nothing checks it.
    public var manufacturer: String?

    public init(productId: String, properties: [PropertySpec], actions: [ActionSpec]? = nil,
                events: [EventSpec]? = nil, name: String? = nil, manufacturer: String? = nil) {
        self.productId = productId
        self.properties = properties
        self.actions = actions
        self.events = events
        self.name = name
        self.manufacturer = manufacturer
    }

    public func property(_ code: String) -> PropertySpec? {
        properties.first { $0.code == code }
    }
}

/// One action of a thing model: its name and input parameters (each checked like a property set), and the names
/// of its output parameters.
public struct ActionSpec: Sendable, Equatable {
    public var name: String
    public var inputs: [PropertySpec]
    public var outputs: [String]

    public init(name: String, inputs: [PropertySpec], outputs: [String] = []) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
    }
}

/// One event of a thing model: its name and output parameters.
public struct EventSpec: Sendable, Equatable {
    public var name: String
    public var outputs: [PropertySpec]

    public init(name: String, outputs: [PropertySpec]) {
        self.name = name
        self.outputs = outputs
    }
}

public struct PropertySpec: Sendable, Equatable {
    public enum Access: String, Sendable {
        /// Reported and settable.
        case rw
        /// Report only: a set is refused.
        case ro
        /// Set only.
        case wo
    }

    public enum Kind: Sendable, Equatable {
        case bool
        /// An integer in `min...max`, on `step` from `min` when a step is given.
        case value(min: Int64, max: Int64, step: Int64?)
        /// A number (integer or not) in `min...max`, on `step` from `min` when a step is given: an Alink TSL
        /// `float` or `double`.
        case decimal(min: Double, max: Double, step: Double?)
        /// One of `range`.
        case enumeration([String])
        /// At most `maxlen` UTF-8 bytes.
        case string(maxlen: Int)
    }

    /// A number's value for people, or a number's name (an Alink TSL `bool` or `enum` key and its name).
    public struct ValueName: Sendable, Equatable {
        public var value: Int64
        public var name: String

        public init(value: Int64, name: String) {
            self.value = value
            self.name = name
        }
    }

    public var code: String
    public var kind: Kind
    public var access: Access
    /// What people call it (the model's `name`); nothing checks it.
    public var name: String?
    /// The unit of the value as shown (after `scale`): `°C`, `%`, `W`; nothing checks it.
    public var unit: String?
    /// The reported number is the value times 10^scale (a TuyaLink `value`'s scale): 235 with scale 1 is 23.5.
    /// Sets and reports carry the unscaled number; only what people see is scaled.
    public var scale: Int
    /// Names of a number's values (an Alink TSL `bool` or `enum`, whose keys are numbers on the wire).
    public var valueNames: [ValueName]
    /// An Alink TSL `bool`: a value 0 or 1 that means false or true.
    public var isNumericBool: Bool

    public init(code: String, kind: Kind, access: Access, name: String? = nil, unit: String? = nil, scale: Int = 0,
                valueNames: [ValueName] = [], isNumericBool: Bool = false) {
        self.code = code
        self.kind = kind
        self.access = access
        self.name = name
        self.unit = unit
        self.scale = scale
        self.valueNames = valueNames
        self.isNumericBool = isNumericBool
    }
}

/// Why a property set was refused before anything was published: names the property and the rule broken.
public struct ValidationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var rule: String

    public var description: String { "\(code): \(rule)" }
}

extension ThingModel {
    /// Checks a set against the model, in sorted code order; the first broken rule is thrown.
    public func validate(_ values: [String: JSONValue]) throws(ValidationError) {
        try validate(values.sorted { $0.key < $1.key }.map { (code: $0.key, value: $0.value) })
    }

    /// Checks a set against the model; the first broken rule is thrown.
    public func validate(_ values: [(code: String, value: JSONValue)]) throws(ValidationError) {
        for (code, value) in values {
            guard let spec = property(code) else {
                throw ValidationError(code: code, rule: "unknown property for product \(productId)")
            }
            try spec.validate(value)
        }
    }
}

extension ThingModel {
    /// Checks an action against the model: a model that describes actions must name it, and every parameter must
    /// be one of its inputs with a value its rules take (parameters left out are the device's to default).
    public func validateAction(_ name: String, params: JSONObject) throws(ValidationError) {
        guard let actions else { return }
        guard let action = actions.first(where: { $0.name == name }) else {
            let known = actions.map(\.name).sorted().joined(separator: ", ")
            throw ValidationError(code: name, rule: "unknown action for product \(productId)"
                                  + (known.isEmpty ? " (it has none)" : " (it has \(known))"))
        }
        for (code, value) in params.sorted(by: { $0.key < $1.key }) {
            guard let input = action.inputs.first(where: { $0.code == code }) else {
                throw ValidationError(code: code, rule: "not a parameter of action \(name)")
            }
            try input.validate(value)
        }
    }
}

extension PropertySpec {
    public func validate(_ value: JSONValue) throws(ValidationError) {
        guard access != .ro else { throw ValidationError(code: code, rule: "read-only (access ro)") }
        switch kind {
        case .bool:
            guard value.boolValue != nil else { throw broken("must be true or false (bool), got \(value.serialized())") }
        case .value(let min, let max, let step):
            guard case .integer(let number) = value else {
                throw broken("must be an integer (value), got \(value.serialized())")
            }
            guard number >= min else { throw broken("\(number) is below the minimum \(min)") }
            guard number <= max else { throw broken("\(number) is above the maximum \(max)") }
            // number - min may not fit Int64 (min -2^63, max 2^63-1) but always fits UInt64, as number >= min.
            if let step, step > 1, UInt64(bitPattern: number &- min) % UInt64(step) != 0 {
                throw broken("\(number) is off the step \(step) (from \(min))")
            }
        case .decimal(let min, let max, let step):
            guard let number = value.doubleValue, number.isFinite else {
                throw broken("must be a number (decimal), got \(value.serialized())")
            }
            guard number >= min else { throw broken("\(number) is below the minimum \(min)") }
            guard number <= max else { throw broken("\(number) is above the maximum \(max)") }
            if let step, step > 0 {
                let steps = (number - min) / step
                // Within a millionth of a step: 0.1 steps from 0 reach 0.3 as 2.9999999999999996 steps.
                guard abs(steps - steps.rounded()) <= 1e-6 else { throw broken("\(number) is off the step \(step) (from \(min))") }
            }
        case .enumeration(let range):
            guard let text = value.stringValue else {
                throw broken("must be one of \(range.joined(separator: ", ")) (enum), got \(value.serialized())")
            }
            guard range.contains(text) else {
                throw broken("'\(text)' is not one of \(range.joined(separator: ", "))")
            }
        case .string(let maxlen):
            guard let text = value.stringValue else {
                throw broken("must be a string, got \(value.serialized())")
            }
            guard text.utf8.count <= maxlen else {
                throw broken("\(text.utf8.count) bytes is longer than maxlen \(maxlen)")
            }
        }
    }

    private func broken(_ rule: String) -> ValidationError {
        ValidationError(code: code, rule: rule)
    }
}
