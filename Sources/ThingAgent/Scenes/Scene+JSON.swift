import JSON
import ThingAgentCore

extension Scene.Action {
    /// The scenes file's form: `{"device":"bf12ab","set":{"switch_1":true}}`, codes in sorted order.
    public var json: JSONValue {
        .object(JSONObject([
            ("device", .string(deviceId)),
            ("set", .object(JSONObject(properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))),
        ]))
    }
}

extension Scene {
    /// The scenes file's form of one scene: `{"name","description","actions":[...]}`.
    public var json: JSONValue {
        .object(JSONObject([
            ("name", .string(name)), ("description", description.map(JSONValue.string) ?? .null),
            ("actions", .array(actions.map(\.json))),
        ]))
    }

    /// A scene from its `json` form (a scenes file's entry, an API request or answer), checked as the scenes file
    /// is: a name, a non-empty list of actions, each a valid device id with a non-empty set, no unknown key.
    public init(json: JSONValue) throws(EditError) {
        var entry = json
        if var object = json.objectValue, object["description"]?.isNull == true {
            _ = object.removeValue(forKey: "description")
            entry = .object(object)
        }
        do {
            self = try Scenes.parseScene(entry, index: 0) { Scenes.LoadError(.scenes, $0) }
        } catch {
            throw .invalid(error.reason)
        }
    }
}
