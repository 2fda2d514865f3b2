public enum EditError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownDevice(String)
    case unknownGroup(String)
    case groupExists(String)
    case unknownNetwork(String, ssid: String)
    case unknownScene(String)
    case sceneExists(String)
    case unknownLink(String)
    case linkExists(String)
    /// A scene's value or a link's code that the device's thing model refuses.
    case modelRefused(String)
    case invalid(String)

    public var description: String {
        switch self {
        case .unknownDevice(let id): "unknown device '\(id)': it is not in the cache"
        case .unknownGroup(let name): "no group named '\(name)'"
        case .groupExists(let name): "a group named '\(name)' already exists"
        case .unknownNetwork(let id, let ssid): "\(id) has no backup network '\(ssid)'"
        case .unknownScene(let name): "no scene named '\(name)'"
        case .sceneExists(let name): "a scene named '\(name)' already exists (change it with scene update)"
        case .unknownLink(let name): "no link named '\(name)'"
        case .linkExists(let name): "a link named '\(name)' already exists"
        case .invalid(let why), .modelRefused(let why): why
        }
    }
}
