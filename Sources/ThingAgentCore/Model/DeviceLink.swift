import JSON

/// A multi-control link: codes on several devices that follow each other. When one member reports a new value
/// for its code, the daemon sets every other member's code to that value (`LinkEngine`).
public struct DeviceLink: Sendable, Equatable {
    /// One device's code, written `DEVICE:CODE`.
    public struct Member: Sendable, Hashable, CustomStringConvertible {
        public var deviceId: String
        public var code: String

        public init(deviceId: String, code: String) {
            self.deviceId = deviceId
            self.code = code
        }

        /// `DEVICE:CODE`, split at the last colon (a device id may contain colons, a code may not); nil when
        /// either side is empty.
        public init?(_ text: String) {
            guard let colon = text.lastIndex(of: ":"), colon != text.startIndex,
                  text.index(after: colon) != text.endIndex else { return nil }
            self.init(deviceId: String(text[..<colon]), code: String(text[text.index(after: colon)...]))
        }

        public var description: String { "\(deviceId):\(code)" }

        public var json: JSONValue { .object(JSONObject([("device", .string(deviceId)), ("code", .string(code))])) }
    }

    /// The most members a link may have: every change of one member sends a set to each of the others, so an
    /// unbounded link turns one report into as many sets as fit a request.
    public static let maxMembers = 32

    public var name: String
    public var members: [Member]
    public var createdAt: Millis

    public init(name: String, members: [Member], createdAt: Millis = 0) {
        self.name = name
        self.members = members
        self.createdAt = createdAt
    }

    public var json: JSONValue {
        .object(JSONObject([("name", .string(name)), ("members", .array(members.map(\.json))),
                            ("createdAt", .integer(createdAt))]))
    }

    /// A link from its `json` form (an API request or answer).
    public init(json: JSONValue) throws(EditError) {
        guard let name = json["name"]?.stringValue else { throw .invalid("'name' is missing or not a string") }
        guard let list = json["members"]?.arrayValue else {
            throw .invalid("'members' must be an array of {\"device\",\"code\"}")
        }
        var members: [Member] = []
        for item in list {
            guard let device = item["device"]?.stringValue, let code = item["code"]?.stringValue else {
                throw .invalid("'members' must be an array of {\"device\",\"code\"}")
            }
            members.append(Member(deviceId: device, code: code))
        }
        self.init(name: name, members: members, createdAt: json["createdAt"]?.int64Value ?? 0)
    }

    /// The rules a link keeps (docs/groups-scenes-links.md, "Multi-control links"), checked at create: a name, two or more distinct
    /// members, each a read-write code of its device's thing model, all of compatible types (bool with bool,
    /// numbers with numbers, enums with equal ranges). A member whose device has no known model cannot be checked,
    /// so it is refused.
    public func check(model: (String) -> ThingModel?) throws(EditError) {
        try checkShape()
        var first: (member: Member, kind: PropertySpec.Kind)?
        for member in members {
            guard DeviceID.isValid(member.deviceId) else { throw .invalid("'\(member.deviceId)' is not a device id") }
            let kind = try Self.kind(of: member, model: model)
            guard let leader = first else {
                first = (member, kind)
                continue
            }
            if let refusal = Self.incompatibility(member, kind, with: leader) { throw .modelRefused(refusal) }
        }
    }

    /// The kind of a member's code when its device's thing model lets it be linked: a known read-write code that is
    /// not a string. A device with no known model cannot be checked, so it cannot be linked.
    static package func kind(of member: Member, model: (String) -> ThingModel?) throws(EditError) -> PropertySpec.Kind {
        guard let thing = model(member.deviceId) else {
            throw .modelRefused("\(member): no thing model for \(member.deviceId)'s product, so its code cannot be "
                           + "checked (--models DIR, and the device's info must name its productId)")
        }
        guard let spec = thing.property(member.code) else {
            throw .modelRefused("\(member): unknown property for product \(thing.productId)")
        }
        guard spec.access == .rw else {
            throw .modelRefused("\(member): a link needs read-write codes, and \(member.code) is \(spec.access.rawValue)")
        }
        if case .string = spec.kind { throw .modelRefused("\(member): string codes cannot be linked") }
        return spec.kind
    }

    /// Why `member`, of `kind`, cannot follow `leader`; nil when it can.
    static package func incompatibility(_ member: Member, _ kind: PropertySpec.Kind,
                                with leader: (member: Member, kind: PropertySpec.Kind)) -> String? {
        compatible(leader.kind, kind) ? nil
            : "\(member) (\(describe(kind))) is not compatible with \(leader.member) (\(describe(leader.kind)))"
    }

    /// The rules that need no device: the name, the number of members (at most `maxMembers`), no member twice.
    /// Checked before anything is looked up, so an oversized link costs no lookups.
    public func checkShape() throws(EditError) {
        guard !name.isEmpty, name.count <= 64 else { throw .invalid("a link name has 1 to 64 characters") }
        guard members.count >= 2 else { throw .invalid("a link needs at least two DEVICE:CODE members") }
        guard members.count <= Self.maxMembers else {
            throw .invalid("a link has at most \(Self.maxMembers) members, and this one names \(members.count)")
        }
        var seen = Set<Member>()
        for member in members where !seen.insert(member).inserted { throw .invalid("\(member) is named twice") }
    }

    static package func compatible(_ a: PropertySpec.Kind, _ b: PropertySpec.Kind) -> Bool {
        switch (a, b) {
        case (.bool, .bool), (.value, .value), (.decimal, .decimal), (.value, .decimal), (.decimal, .value): true
        case (.enumeration(let x), .enumeration(let y)): Set(x) == Set(y)
        default: false
        }
    }

    static package func describe(_ kind: PropertySpec.Kind) -> String {
        switch kind {
        case .bool: "bool"
        case .value(let min, let max, let step): "value \(min)...\(max)" + (step.map { " step \($0)" } ?? "")
        case .decimal(let min, let max, let step): "decimal \(min)...\(max)" + (step.map { " step \($0)" } ?? "")
        case .enumeration(let range): "enum \(range.joined(separator: ","))"
        case .string(let maxlen): "string of at most \(maxlen) bytes"
        }
    }
}
