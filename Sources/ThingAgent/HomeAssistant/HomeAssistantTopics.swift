/// Where Home Assistant's MQTT discovery, the devices' states and availability, and its commands live
/// (docs/home-assistant.md, "Topics"). Pure: names only.
struct HomeAssistantTopics: Sendable, Equatable {
    /// `homeAssistant.discoveryPrefix`: `<prefix>/device/<object id>/config`, and Home Assistant's birth message.
    let discoveryPrefix: String
    /// `homeAssistant.topic`, the agent's own: `<topic>/<D>/state`, `/availability`, `/set`.
    let topic: String
    /// The agent's retained status (`{"status":"online"|"offline"}`): every entity's first availability.
    let agentStatus: String

    init(_ settings: AgentConfiguration.HomeAssistant, agentStatus: String) {
        discoveryPrefix = settings.discoveryPrefix
        topic = settings.topic
        self.agentStatus = agentStatus
    }

    /// The object id of the agent's own Home Assistant device (its scenes): `_ag` is no escape
    /// (`objectID(device:)` writes `_` only as `__` or before two hex digits), so no device has it.
    static let agentObjectID = "thing-agent_agent"

    /// A device's object id in the discovery topic: Home Assistant takes `[A-Za-z0-9_-]`, a device id may also
    /// hold `.` and `:`. Letters, digits and `-` stay, `_` becomes `__`, any other byte `_` and two hex digits
    /// (`a1Light1.lamp` is `a1Light1_2elamp`): one object id per device id, and back.
    static func objectID(device: String) -> String {
        var out = ""
        for byte in device.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "_"):
                out += "__"
            default:
                out += "_" + hex(byte)
            }
        }
        return out
    }

    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef".unicodeScalars)
        return String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 15)])
    }

    func config(objectID: String) -> String { "\(discoveryPrefix)/device/\(objectID)/config" }
    func config(device: String) -> String { config(objectID: Self.objectID(device: device)) }
    var agentConfig: String { config(objectID: Self.agentObjectID) }
    func state(_ device: String) -> String { "\(topic)/\(device)/state" }
    func availability(_ device: String) -> String { "\(topic)/\(device)/availability" }
    func command(_ device: String) -> String { "\(topic)/\(device)/set" }
    /// Scene commands: one level deeper than a device's, so no device id can take it.
    var sceneCommand: String { "\(topic)/agent/scenes/set" }
    /// Home Assistant's birth (`online`) and last will (`offline`).
    var birth: String { "\(discoveryPrefix)/status" }

    /// What the daemon subscribes to: the devices' commands, the scenes' and Home Assistant's status.
    var subscriptions: [String] { ["\(topic)/+/set", sceneCommand, birth] }

    /// What an incoming message on one of `subscriptions` is.
    enum Inbound: Equatable {
        case command(device: String)
        case scene
        case birth
    }

    func route(_ topic: String) -> Inbound? {
        if topic == birth { return .birth }
        if topic == sceneCommand { return .scene }
        let prefix = self.topic + "/"
        guard topic.hasPrefix(prefix), topic.hasSuffix("/set") else { return nil }
        let middle = topic.dropFirst(prefix.count).dropLast(4)
        guard !middle.isEmpty, !middle.contains("/") else { return nil }
        return .command(device: String(middle))
    }
}
