import JSON

/// A finished gateway replacement and what it moved from the faulty gateway to the one that took its place
/// (besides the sub-devices): the groups, scenes and links that named the faulty gateway, and the local fields
/// (`name`, `room`, `icon`) that moved because the new gateway had none of its own.
public struct GatewayReplacement: Sendable, Equatable {
    /// The faulty gateway.
    public var old: String
    /// The gateway that took its place.
    public var new: String
    /// Device time of the `finish` report.
    public var time: Millis
    /// Agent time the replacement was written to the cache file.
    public var recordedAt: Millis
    public var groups: [String]
    public var scenes: [String]
    public var links: [String]
    public var fields: [String]

    public init(old: String, new: String, time: Millis, recordedAt: Millis, groups: [String] = [],
                scenes: [String] = [], links: [String] = [], fields: [String] = []) {
        self.old = old
        self.new = new
        self.time = time
        self.recordedAt = recordedAt
        self.groups = groups
        self.scenes = scenes
        self.links = links
        self.fields = fields
    }

    /// Whether anything besides the sub-devices moved.
    public var movedAnything: Bool { !(groups.isEmpty && scenes.isEmpty && links.isEmpty && fields.isEmpty) }

    /// What moved, as kept in `gateway_replacements.moved` and answered by the API.
    public var moved: JSONObject {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        return JSONObject([("groups", strings(groups)), ("scenes", strings(scenes)), ("links", strings(links)),
                           ("fields", strings(fields))])
    }

    public var json: JSONObject {
        var object = JSONObject([("old", .string(old)), ("new", .string(new)), ("time", .integer(time)),
                                 ("recordedAt", .integer(recordedAt))])
        object.merge(moved)
        return object
    }

    /// The replacement from its `json` form (an API answer); nil when it is not one.
    public init?(json: JSONValue) {
        guard let old = json["old"]?.stringValue, let new = json["new"]?.stringValue,
              let time = json["time"]?.int64Value else { return nil }
        func strings(_ key: String) -> [String] { json[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        self.init(old: old, new: new, time: time, recordedAt: json["recordedAt"]?.int64Value ?? 0,
                  groups: strings("groups"), scenes: strings("scenes"), links: strings("links"),
                  fields: strings("fields"))
    }

    /// One line for people: `moved to gwNew: groups hall; scenes evening; links stairs; name, room`.
    public var summary: String {
        var parts: [String] = []
        if !groups.isEmpty { parts.append("group\(groups.count == 1 ? "" : "s") \(groups.joined(separator: ", "))") }
        if !scenes.isEmpty { parts.append("scene\(scenes.count == 1 ? "" : "s") \(scenes.joined(separator: ", "))") }
        if !links.isEmpty { parts.append("link\(links.count == 1 ? "" : "s") \(links.joined(separator: ", "))") }
        if !fields.isEmpty { parts.append("local \(fields.joined(separator: ", "))") }
        return parts.isEmpty ? "no groups, scenes, links or local fields named \(old)"
            : "moved from \(old) to \(new): " + parts.joined(separator: "; ")
    }
}
