import FoundationEssentials
import JSON
import ThingAgentCore

/// A named list of property sets over several devices, run together.
public struct Scene: Sendable, Equatable {
    /// One device's property set.
    public struct Action: Sendable, Equatable {
        public var deviceId: String
        public var properties: [String: JSONValue]

        public init(deviceId: String, properties: [String: JSONValue]) {
            self.deviceId = deviceId
            self.properties = properties
        }
    }

    public var name: String
    public var description: String?
    public var actions: [Action]

    public init(name: String, description: String? = nil, actions: [Action]) {
        self.name = name
        self.description = description
        self.actions = actions
    }
}

/// The scenes of a scenes file (`scenesFile`, `--scenes FILE`):
/// `{"scenes":[{"name":"evening","actions":[{"device":"bf12ab","set":{"switch_1":true}}]}]}`.
public struct Scenes: Sendable, Equatable {
    public var all: [Scene]

    public init(_ scenes: [Scene]) {
        all = scenes
    }

    public func scene(named name: String) -> Scene? {
        all.first { $0.name == name }
    }

    /// A scenes file that cannot be used: the file, the scene, and why.
    public typealias LoadError = ConfigError

    /// Reads and checks a scenes file; anything wrong is an error naming the file and the scene.
    public init(file path: String) throws(LoadError) {
        self = try Self.parse(try ConfigFile.bytes(path, .scenes), file: path)
    }

    /// Parses a scenes file's contents. Unknown keys are errors, so a misspelt key is not silently ignored.
    public static func parse(_ bytes: [UInt8], file: String) throws(LoadError) -> Scenes {
        func fail(_ reason: String) -> LoadError { LoadError(.scenes, source: file, reason) }
        let root = try ConfigFile.json(bytes, .scenes, source: file)
        guard let object = root.objectValue, let list = object["scenes"]?.arrayValue else {
            throw fail("needs an object with a 'scenes' array")
        }
        if let key = object.keys.first(where: { $0 != "scenes" }) { throw fail("unknown key '\(key)'") }
        var scenes: [Scene] = []
        for (index, entry) in list.enumerated() {
            let scene = try parseScene(entry, index: index, fail: fail)
            guard !scenes.contains(where: { $0.name == scene.name }) else {
                throw fail("scene '\(scene.name)' is defined twice")
            }
            scenes.append(scene)
        }
        return Scenes(scenes)
    }

    static func parseScene(_ entry: JSONValue, index: Int,
                                   fail: (String) -> LoadError) throws(LoadError) -> Scene {
        guard let object = entry.objectValue, let name = object["name"]?.stringValue, !name.isEmpty else {
            throw fail("scene \(index + 1) needs a 'name'")
        }
        if let key = object.keys.first(where: { !["name", "description", "actions"].contains($0) }) {
            throw fail("scene '\(name)': unknown key '\(key)'")
        }
        let description = object["description"]?.stringValue
        guard object["description"] == nil || description != nil else {
            throw fail("scene '\(name)': 'description' must be a string")
        }
        guard let list = object["actions"]?.arrayValue, !list.isEmpty else {
            throw fail("scene '\(name)' needs a non-empty 'actions' array")
        }
        var actions: [Scene.Action] = []
        for (number, item) in zip(1..., list) {
            let context = "scene '\(name)', action \(number)"
            guard let action = item.objectValue else { throw fail("\(context) is not an object") }
            if let key = action.keys.first(where: { $0 != "device" && $0 != "set" }) {
                throw fail("\(context): unknown key '\(key)'")
            }
            guard let device = action["device"]?.stringValue, DeviceID.isValid(device) else {
                throw fail("\(context) needs a valid 'device' id")
            }
            guard let set = action["set"]?.objectValue, !set.isEmpty else {
                throw fail("\(context) needs a non-empty 'set' object")
            }
            actions.append(Scene.Action(
                deviceId: device, properties: Dictionary(set.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 })))
        }
        return Scene(name: name, description: description, actions: actions)
    }
}
