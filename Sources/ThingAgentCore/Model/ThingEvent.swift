import JSON

/// An event a device reported (a button press, a fault): its name in the thing model, its output parameters and
/// the time it happened. The cache keeps the latest of each name per device; listeners hear every one.
public struct ThingEvent: Sendable, Equatable {
    /// The event's identifier (`eventCode` in the native dialect, the `{id}` of an Alink `thing/event/{id}/post`).
    public var name: String
    /// Its output parameters (an object; empty when it has none).
    public var params: JSONValue
    public var time: Millis

    public init(name: String, params: JSONValue, time: Millis) {
        self.name = name
        self.params = params
        self.time = time
    }
}

/// How the agent knows whether a device is online (`DeviceSnapshot.presence`).
public enum PresenceSource: String, Sendable, Equatable, CaseIterable {
    /// The device's own status report (or its will, which the broker publishes when it goes).
    case announced
    /// Its gateway logged it in or out (an Alink sub-device's session).
    case session
    /// Its own traffic: a device that announces no status is online while it speaks.
    case traffic
    /// The broker's own client events (mosquitto's `$SYS/broker/log`): connected, disconnected, timed out.
    case broker
}

extension ThingEvent {
    /// `{"name","params","time"}`: in `info --json`, the event feed and the API.
    public var json: JSONObject {
        JSONObject([("name", .string(name)), ("params", params), ("time", .integer(time))])
    }

    public init?(json: JSONValue?) {
        guard let json, let name = json["name"]?.stringValue, let time = json["time"]?.int64Value else { return nil }
        self.init(name: name, params: json["params"] ?? .object([:]), time: time)
    }
}
