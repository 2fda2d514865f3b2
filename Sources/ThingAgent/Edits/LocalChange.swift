import JSON
import ThingAgentCore

/// A change to what the cache file keeps locally (metadata, groups, backup networks, scenes, links): the one set of
/// writes behind the CLI's `edit`, `group`, `network`, `scene` and `link` and the API methods `edit`, `group`,
/// `network`, `scenes` and `links`. The daemon applies it when it
/// runs (the CLI sends it over the API); otherwise the CLI applies it itself, holding the cache's lock.
public enum LocalChange: Sendable, Equatable {
    case edit(device: String, DeviceEdit)
    case createGroup(String, devices: [String])
    case deleteGroup(String)
    case addToGroup(String, devices: [String])
    case removeFromGroup(String, devices: [String])
    case addNetwork(device: String, BackupNetwork)
    case removeNetwork(device: String, ssid: String)
    case createScene(Scene)
    case updateScene(Scene)
    case deleteScene(String)
    case createLink(DeviceLink)
    case deleteLink(String)

    /// The API method that carries it.
    public var method: String {
        switch self {
        case .edit: "edit"
        case .createGroup, .deleteGroup, .addToGroup, .removeFromGroup: "group"
        case .addNetwork, .removeNetwork: "network"
        case .createScene, .updateScene, .deleteScene: "scenes"
        case .createLink, .deleteLink: "links"
        }
    }

    /// The devices that must be known (in the cache) for the change to apply.
    public var devices: [String] {
        switch self {
        case .edit(let device, _), .addNetwork(let device, _), .removeNetwork(let device, _): [device]
        case .createGroup(_, let devices), .addToGroup(_, let devices): devices
        case .createScene(let scene), .updateScene(let scene): scene.actions.map(\.deviceId)
        case .createLink(let link): link.members.map(\.deviceId)
        case .deleteGroup, .removeFromGroup, .deleteScene, .deleteLink: []
        }
    }

    /// The API request's fields (docs/details-and-integration.md, "The API over MQTT").
    public var request: JSONObject {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        switch self {
        case .edit(let device, let edit):
            var object = JSONObject([("device", .string(device))])
            if let name = edit.name { object["name"] = .string(name) }
            if let room = edit.room { object["room"] = .string(room) }
            if let icon = edit.icon { object["icon"] = .string(icon) }
            if let warning = edit.offlineWarning { object["offlineWarning"] = .bool(warning) }
            return object
        case .createGroup(let name, let devices):
            return JSONObject([("action", "create"), ("name", .string(name)), ("devices", strings(devices))])
        case .deleteGroup(let name):
            return JSONObject([("action", "delete"), ("name", .string(name))])
        case .addToGroup(let name, let devices):
            return JSONObject([("action", "add"), ("name", .string(name)), ("devices", strings(devices))])
        case .removeFromGroup(let name, let devices):
            return JSONObject([("action", "remove"), ("name", .string(name)), ("devices", strings(devices))])
        case .addNetwork(let device, let network):
            return JSONObject([("action", "add"), ("device", .string(device)), ("ssid", .string(network.ssid)),
                               ("password", optional(network.password)),
                               ("priority", .integer(Int64(network.priority)))])
        case .removeNetwork(let device, let ssid):
            return JSONObject([("action", "remove"), ("device", .string(device)), ("ssid", .string(ssid))])
        case .createScene(let scene), .updateScene(let scene):
            var object = JSONObject([("action", .string(self == .createScene(scene) ? "create" : "update"))])
            object.merge(scene.json.objectValue ?? JSONObject())
            return object
        case .deleteScene(let name):
            return JSONObject([("action", "delete"), ("name", .string(name))])
        case .createLink(let link):
            return JSONObject([("action", "create"), ("name", .string(link.name)),
                               ("members", .array(link.members.map(\.json)))])
        case .deleteLink(let name):
            return JSONObject([("action", "delete"), ("name", .string(name))])
        }
    }

    /// Reads a change from an API request of `method`; nil when the method carries no local change.
    /// Missing or mistyped fields are `EditError.invalid`, naming the field.
    public init?(method: String, request: JSONObject) throws(EditError) {
        func string(_ key: String) throws(EditError) -> String {
            guard let value = request[key]?.stringValue else { throw .invalid("'\(key)' is missing or not a string") }
            return value
        }
        func devices() throws(EditError) -> [String] {
            guard let value = request["devices"] else { return [] }
            guard let items = value.arrayValue?.compactMap(\.stringValue), items.count == value.arrayValue?.count else {
                throw .invalid("'devices' must be an array of device ids")
            }
            return items
        }
        switch method {
        case "edit":
            var edit = DeviceEdit()
            edit.name = request["name"]?.stringValue
            edit.room = request["room"]?.stringValue
            edit.icon = request["icon"]?.stringValue
            edit.offlineWarning = request["offlineWarning"]?.boolValue
            guard !edit.isEmpty else { throw .invalid("nothing to edit: give name, room, icon or offlineWarning") }
            self = .edit(device: try string("device"), edit)
        case "group":
            let name = try string("name")
            switch try string("action") {
            case "create": self = .createGroup(name, devices: try devices())
            case "delete": self = .deleteGroup(name)
            case "add": self = .addToGroup(name, devices: try devices())
            case "remove": self = .removeFromGroup(name, devices: try devices())
            case let other: throw .invalid("unknown group action '\(other)': create, delete, add or remove")
            }
        case "network":
            let device = try string("device"), ssid = try string("ssid")
            switch try string("action") {
            case "add":
                let priority = request["priority"].map { $0.int64Value.map(Int.init) } ?? 0
                guard let priority else { throw .invalid("'priority' must be an integer") }
                self = .addNetwork(device: device, BackupNetwork(ssid: ssid, password: request["password"]?.stringValue,
                                                                 priority: priority))
            case "remove": self = .removeNetwork(device: device, ssid: ssid)
            case let other: throw .invalid("unknown network action '\(other)': add or remove")
            }
        case "scenes":
            let action = try string("action")
            if action == "list" { return nil }
            let name = try string("name")
            // The scene's own fields only: the request also carries `id`, `replyTo` and the action.
            let scene = { () throws(EditError) -> Scene in
                try Scene(json: .object(JSONObject(["name", "description", "actions"].compactMap { key in
                    request[key].map { (key, $0) }
                })))
            }
            switch action {
            case "create": self = .createScene(try scene())
            case "update": self = .updateScene(try scene())
            case "delete": self = .deleteScene(name)
            case let other: throw .invalid("unknown scenes action '\(other)': list, create, update or delete")
            }
        case "links":
            let action = try string("action")
            if action == "list" { return nil }
            let name = try string("name")
            switch action {
            case "create":
                self = .createLink(try DeviceLink(json: .object(JSONObject([
                    ("name", .string(name)), ("members", request["members"] ?? .null)]))))
            case "delete": self = .deleteLink(name)
            case let other: throw .invalid("unknown links action '\(other)': list, create or delete")
            }
        default:
            return nil
        }
    }
}

extension LocalStore {
    /// Applies `change` and returns what it made, as the API answers it: the metadata for an edit, the group
    /// for a group change, the device's networks for a network change, the scene or link. `isKnown` says whether a
    /// device is cached; a change naming an unknown device is `EditError.unknownDevice` and changes nothing.
    /// `model` gives a device's thing model: a scene's values and a link's codes are checked against it.
    package func apply(_ change: LocalChange, isKnown: (String) -> Bool,
                      model: (String) -> ThingModel?) throws -> JSONValue {
        if case .createLink(let link) = change { try link.checkShape() }
        for device in change.devices where DeviceID.isValid(device) && !isKnown(device) {
            throw EditError.unknownDevice(device)
        }
        switch change {
        case .edit(let device, let edit):
            return .object(try self.edit(device, edit).json)
        case .createGroup(let name, let devices):
            return try createGroup(name, devices: devices).json
        case .deleteGroup(let name):
            guard try deleteGroup(name) else { throw EditError.unknownGroup(name) }
            return .object(JSONObject([("deleted", .string(name))]))
        case .addToGroup(let name, let devices):
            try addToGroup(name, devices: devices)
            return try group(named: name)?.json ?? .null
        case .removeFromGroup(let name, let devices):
            try removeFromGroup(name, devices: devices)
            return try group(named: name)?.json ?? .null
        case .addNetwork(let device, let network):
            try addBackupNetwork(device, network)
            return .array(try backupNetworks(device).map(\.json))
        case .removeNetwork(let device, let ssid):
            guard try removeBackupNetwork(device, ssid: ssid) else { throw EditError.unknownNetwork(device, ssid: ssid) }
            return .array(try backupNetworks(device).map(\.json))
        case .createScene(let scene), .updateScene(let scene):
            try scene.check(model: model)
            return try saveScene(scene, replacing: change == .updateScene(scene)).json
        case .deleteScene(let name):
            guard try deleteScene(name) else { throw EditError.unknownScene(name) }
            return .object(JSONObject([("deleted", .string(name))]))
        case .createLink(let link):
            try link.check(model: model)
            return try createLink(link).json
        case .deleteLink(let name):
            guard try deleteLink(name) else { throw EditError.unknownLink(name) }
            return .object(JSONObject([("deleted", .string(name))]))
        }
    }
}

extension DeviceGroup {
    public var json: JSONValue {
        .object(JSONObject([("name", .string(name)), ("devices", .array(devices.map(JSONValue.string))),
                            ("createdAt", .integer(createdAt))]))
    }

    /// The group from its `json` form (an API answer).
    public init?(json: JSONValue) {
        guard let name = json["name"]?.stringValue, let devices = json["devices"]?.arrayValue else { return nil }
        self.init(name: name, devices: devices.compactMap(\.stringValue), createdAt: json["createdAt"]?.int64Value ?? 0)
    }
}

extension BackupNetwork {
    /// Never with the password: whether there is one.
    public var json: JSONValue {
        .object(JSONObject([("ssid", .string(ssid)), ("priority", .integer(Int64(priority))),
                            ("hasPassword", .bool(password != nil)), ("addedAt", .integer(addedAt))]))
    }
}
