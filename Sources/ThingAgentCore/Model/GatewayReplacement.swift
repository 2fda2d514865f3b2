import JSON

/// A finished gateway replacement and what it moved from the faulty gateway to the one that took its place
/// (besides the sub-devices): the groups, scenes and links that named the faulty gateway, and the local fields
/// (`name`, `room`, `icon`) that moved because the new gateway had none of its own; and the link members the new
/// gateway's thing model refuses, dropped, with the links that were left with fewer than two members, deleted.
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
    /// The links whose members moved and that are still links.
    public var links: [String]
    public var fields: [String]
    /// Moved link members the new gateway's model does not let follow their link (`link create`'s rules).
    public var droppedLinkMembers: [DroppedLinkMember]
    /// Links left with fewer than two members (a member the new gateway already was, or dropped ones): deleted.
    public var dissolvedLinks: [String]

    public init(old: String, new: String, time: Millis, recordedAt: Millis, groups: [String] = [],
                scenes: [String] = [], links: [String] = [], fields: [String] = [],
                droppedLinkMembers: [DroppedLinkMember] = [], dissolvedLinks: [String] = []) {
        self.old = old
        self.new = new
        self.time = time
        self.recordedAt = recordedAt
        self.groups = groups
        self.scenes = scenes
        self.links = links
        self.fields = fields
        self.droppedLinkMembers = droppedLinkMembers
        self.dissolvedLinks = dissolvedLinks
    }

    /// Whether anything besides the sub-devices moved.
    public var movedAnything: Bool {
        !(groups.isEmpty && scenes.isEmpty && links.isEmpty && fields.isEmpty && droppedLinkMembers.isEmpty
          && dissolvedLinks.isEmpty)
    }

    /// What moved, as kept in `gateway_replacements.moved` and answered by the API.
    public var moved: JSONObject {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        return JSONObject([("groups", strings(groups)), ("scenes", strings(scenes)), ("links", strings(links)),
                           ("fields", strings(fields)), ("droppedLinkMembers", .array(droppedLinkMembers.map(\.json))),
                           ("dissolvedLinks", strings(dissolvedLinks))])
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
                  fields: strings("fields"),
                  droppedLinkMembers: (json["droppedLinkMembers"]?.arrayValue ?? []).compactMap(DroppedLinkMember.init(json:)),
                  dissolvedLinks: strings("dissolvedLinks"))
    }

    /// One line for people: `moved from gwOld to gwNew: groups hall; scenes evening; links stairs; local name,
    /// room`, then what the new gateway's model refused: `; dropped from link leds: gwNew:led_switch (why)` and
    /// `; links dissolved (fewer than two members left): pair`.
    public var summary: String {
        var parts: [String] = []
        if !groups.isEmpty { parts.append("group\(groups.count == 1 ? "" : "s") \(groups.joined(separator: ", "))") }
        if !scenes.isEmpty { parts.append("scene\(scenes.count == 1 ? "" : "s") \(scenes.joined(separator: ", "))") }
        if !links.isEmpty { parts.append("link\(links.count == 1 ? "" : "s") \(links.joined(separator: ", "))") }
        if !fields.isEmpty { parts.append("local \(fields.joined(separator: ", "))") }
        for dropped in droppedLinkMembers {
            parts.append("dropped from link \(dropped.link): \(dropped.member) (\(dropped.reason))")
        }
        if !dissolvedLinks.isEmpty {
            parts.append("link\(dissolvedLinks.count == 1 ? "" : "s") dissolved (fewer than two members left): "
                         + dissolvedLinks.joined(separator: ", "))
        }
        return parts.isEmpty ? "no groups, scenes, links or local fields named \(old)"
            : "moved from \(old) to \(new): " + parts.joined(separator: "; ")
    }
}
