import FoundationEssentials
import Glibc
import ThingAgent

/// Options every subcommand takes. A flag overrides the environment, which overrides the config file.
enum CommonOptions {
    /// Flags that map one-to-one onto configuration keys.
    static let settings: [(flag: String, key: String, valueName: String, help: String)] = [
        ("broker", "broker", "URLS", "broker URL, mqtt://host:port or mqtts://host:port; several comma-separated, tried in turn"),
        ("db", "database", "PATH", "the cache file"),
        ("topic-root", "topicRoot", "R", "topic root of the device tree (default things)"),
        ("dialects", "dialects", "LIST", "wire dialects spoken, comma-separated: native, alink, tuyalink (default native)"),
        ("models", "modelsDirectory", "DIR", "directory of thing models (<productId>.json)"),
        ("username", "username", "NAME", "broker user name"),
        ("password", "password", "SECRET", "broker password (prefer THING_AGENT_PASSWORD)"),
        ("client-id", "clientId", "ID", "MQTT client id"),
        ("group-name", "agentGroup", "NAME", "the agent group: its active instance answers (standby daemons on other hosts)"),
        ("ca-file", "caFile", "FILE", "CA certificate for TLS"),
        ("cert-file", "certFile", "FILE", "client certificate for TLS"),
        ("key-file", "keyFile", "FILE", "client key for TLS"),
        ("log-level", "logLevel", "LEVEL", "trace, debug, info, notice, warning, error or critical"),
        ("log-format", "logFormat", "FORMAT", "text or json"),
    ]

    static let options: [OptionSpec] =
        [OptionSpec(name: "config", valueName: "FILE", help: "JSON config file (also THING_AGENT_CONFIG)")]
        + settings.map { OptionSpec(name: $0.flag, valueName: $0.valueName, help: $0.help) }
        + [OptionSpec(name: "help", valueName: nil, help: "show this help")]

    /// Builds the configuration: defaults, then the config file, then THING_AGENT_* variables, then flags.
    static func configuration(_ arguments: ParsedArguments) throws -> AgentConfiguration {
        var configuration = AgentConfiguration()
        let environment = agentEnvironment()
        do {
            if let file = arguments.value("config") ?? environment["THING_AGENT_CONFIG"] {
                try configuration.apply(file: file)
            }
            try configuration.apply(environment: environment)
            for setting in settings {
                if let value = arguments.value(setting.flag) {
                    try configuration.apply(key: setting.key, text: value, source: "--\(setting.flag)")
                }
            }
            try configuration.checkCombinations()
        } catch {
            throw CommandFailure(code: .usage, message: error.description)
        }
        return configuration
    }

    /// The process's `THING_AGENT_*` variables, read from `environ` itself: on a short command, Foundation's
    /// `ProcessInfo` (set up on first use, every variable copied into a dictionary) cost more than the work.
    static func agentEnvironment() -> [String: String] {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            entry += 1
            guard strncmp(pointer, "THING_AGENT_", 12) == 0 else { continue }
            let text = String(cString: pointer)
            guard let equals = text.firstIndex(of: "=") else { continue }
            variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return variables
    }

    static func logger(_ configuration: AgentConfiguration, label: String = "thing-agent") -> AgentLogger {
        AgentLogger(label: label, level: configuration.logLevel, handler: configuration.logFormat.standardErrorHandler())
    }
}
