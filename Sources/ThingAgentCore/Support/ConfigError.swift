import FoundationEssentials
import JSON
import Platform

/// The one error of everything the agent is configured with: its config file, environment and flags, the detail
/// layout, the firmware catalog, the scenes file and the thing models. It names where (`source`: the file, or the
/// variable or flag), the key or entry in it when there is one, and why.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being read: the first words of the message.
    public enum Kind: String, Sendable {
        case agentConfig = "config file"
        case detailConfig = "detail config"
        case firmwareCatalog = "firmware catalog"
        case scenes = "scenes file"
        case thingModel = "thing model"
        /// An environment variable or a flag, or settings that do not go together: `source` says which.
        case setting = ""
    }

    public var kind: Kind
    /// The file's path, the variable or flag; empty for content read from elsewhere (an API request's layout).
    public var source: String
    /// The key, section, product or scene the reason is about, when there is one.
    public var key: String?
    public var reason: String

    public init(_ kind: Kind, source: String = "", key: String? = nil, _ reason: String) {
        self.kind = kind
        self.source = source
        self.key = key
        self.reason = reason
    }

    /// `<kind> <source>: <key>: <reason>`, each part where there is one.
    public var description: String {
        let place = [kind.rawValue, source].filter { !$0.isEmpty }.joined(separator: " ")
        let what = (key.map { "\($0): " } ?? "") + reason
        return place.isEmpty ? what : "\(place): \(what)"
    }

    /// The same error, said of `source` (content parsed first, then named by the file it came from).
    package func from(_ source: String) -> ConfigError {
        var error = self
        error.source = source
        return error
    }
}

/// Reading a configuration file: its bytes and its JSON, with the errors every file has in the same words.
package enum ConfigFile {
    /// A file's bytes; `cannot read it` (with the system's reason) otherwise.
    static package func bytes(_ path: String, _ kind: ConfigError.Kind) throws(ConfigError) -> [UInt8] {
        do {
            return try readWholeFile(path)
        } catch {
            throw ConfigError(kind, source: path, "cannot read it (\(error))")
        }
    }

    /// `bytes` as JSON; `not valid JSON: <where>` otherwise.
    static package func json(_ bytes: [UInt8], _ kind: ConfigError.Kind, source: String) throws(ConfigError) -> JSONValue {
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw ConfigError(kind, source: source, "not valid JSON: \(error)")
        }
    }

    /// A file read and parsed.
    static package func read(_ path: String, _ kind: ConfigError.Kind) throws(ConfigError) -> JSONValue {
        try json(try bytes(path, kind), kind, source: path)
    }
}
