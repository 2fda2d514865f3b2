import JSON

/// What removing a device took it out of in the local tables (besides its own rows): the groups it was in, the
/// scenes that had an action for it, the links it was a member of. A scene left with no action and a link left
/// with fewer than two members are deleted with it (`deletedScenes`, `deletedLinks`): neither can do anything
/// any more, and a scene with no action cannot be saved either.
public struct DeviceRemoval: Sendable, Equatable {
    public var device: String
    public var groups: [String] = []
    /// Scenes that keep their other actions.
    public var scenes: [String] = []
    public var deletedScenes: [String] = []
    /// Links that keep two members or more.
    public var links: [String] = []
    public var deletedLinks: [String] = []
    /// With provisioning: whether the device's broker client and role went with it (nil: provisioning is off).
    public var brokerCredentials: BrokerCredentials?

    public enum BrokerCredentials: Sendable, Equatable {
        case deleted
        /// A sub-device has no broker credentials of its own: it speaks through its gateway, whose role no longer
        /// reaches its topics.
        case noneOfItsOwn(gateway: String)
        /// This process could not administer the broker (why): the daemon's next start deletes them.
        case leftForTheDaemon(String)
    }

    public init(device: String) {
        self.device = device
    }

    /// Whether the device was named anywhere besides its own rows.
    public var touchedAnything: Bool {
        !(groups.isEmpty && scenes.isEmpty && deletedScenes.isEmpty && links.isEmpty && deletedLinks.isEmpty)
    }

    /// As the API's `remove` answers it (beside `removed`).
    public var json: JSONObject {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        var object = JSONObject([
            ("removed", .string(device)), ("groups", strings(groups)), ("scenes", strings(scenes)),
            ("deletedScenes", strings(deletedScenes)), ("links", strings(links)),
            ("deletedLinks", strings(deletedLinks)),
        ])
        switch brokerCredentials {
        case .deleted?: object["brokerCredentials"] = "deleted"
        case .noneOfItsOwn(let gateway)?:
            object["brokerCredentials"] = "none"
            object["gatewayId"] = .string(gateway)
        case .leftForTheDaemon(let why)?:
            object["brokerCredentials"] = "leftForTheDaemon"
            object["brokerCredentialsNote"] = .string(why)
        case nil: break
        }
        return object
    }

    /// From the API's answer; the lists missing from an older daemon's answer are empty.
    public init(json: JSONValue, device: String) {
        func strings(_ key: String) -> [String] { json[key]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        self.device = json["removed"]?.stringValue ?? device
        groups = strings("groups")
        scenes = strings("scenes")
        deletedScenes = strings("deletedScenes")
        links = strings("links")
        deletedLinks = strings("deletedLinks")
        switch json["brokerCredentials"]?.stringValue {
        case "deleted": brokerCredentials = .deleted
        case "none": brokerCredentials = .noneOfItsOwn(gateway: json["gatewayId"]?.stringValue ?? "")
        case "leftForTheDaemon": brokerCredentials = .leftForTheDaemon(json["brokerCredentialsNote"]?.stringValue ?? "")
        default: brokerCredentials = nil
        }
    }

    /// One line for the CLI: what the device was taken out of; empty when nothing.
    public var summary: String {
        var parts: [String] = []
        func add(_ what: String, _ names: [String]) {
            if !names.isEmpty { parts.append("\(what) \(names.joined(separator: ", "))") }
        }
        add("groups", groups)
        add("scenes", scenes)
        add("deleted scenes (no action left)", deletedScenes)
        add("links", links)
        add("deleted links (one member left)", deletedLinks)
        return parts.joined(separator: "; ")
    }

    /// One line for the CLI about the broker credentials; nil when provisioning is off.
    public var credentialsSummary: String? {
        switch brokerCredentials {
        case .deleted?: "its broker credentials were deleted (it can no longer connect)"
        case .noneOfItsOwn(let gateway)?:
            "a sub-device has no broker credentials of its own; its gateway \(gateway) no longer reaches its topics"
        case .leftForTheDaemon(let why)?:
            "its broker credentials are deleted at the daemon's next start (this command could not: \(why))"
        case nil: nil
        }
    }
}
