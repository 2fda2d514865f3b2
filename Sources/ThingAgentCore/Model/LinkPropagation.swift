import JSON

/// What a multi-control link did with one member's new value: which members it set, and which it left out and why.
/// Members are written `DEVICE:CODE`.
public struct LinkPropagation: Sendable, Equatable {
    /// The link's name.
    public var link: String
    /// The member that reported the value.
    public var source: String
    public var code: String
    public var value: JSONValue
    /// Members a set was sent to.
    public var sent: [String]
    /// Members known to be offline: nothing sent.
    public var offline: [String]
    /// Members whose thing model refuses the value (outside its min/max/step, not in its range): nothing sent.
    public var outOfRange: [String]

    public init(link: String, source: String, code: String, value: JSONValue, sent: [String] = [],
                offline: [String] = [], outOfRange: [String] = []) {
        self.link = link
        self.source = source
        self.code = code
        self.value = value
        self.sent = sent
        self.offline = offline
        self.outOfRange = outOfRange
    }

    public var json: JSONObject {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        return JSONObject([
            ("link", .string(link)), ("source", .string(source)), ("code", .string(code)), ("value", value),
            ("sent", strings(sent)), ("offline", strings(offline)), ("outOfRange", strings(outOfRange)),
        ])
    }
}
