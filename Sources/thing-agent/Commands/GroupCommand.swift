import JSON
import ThingAgent

/// `thing-agent group ...`: device groups kept in the cache file.
enum GroupCommand: Command {
    static let spec = CommandSpec(
        name: "group",
        summary: "device groups: list, create, delete, add and remove members",
        usage: """
            thing-agent group list [--json] | create NAME [DEVICE...] | delete NAME | add NAME DEVICE... \
            | remove NAME DEVICE... [options]
            """,
        options: [OptionSpec(name: "json", valueName: nil, help: "print JSON"), daemonTimeoutOption]
            + CommonOptions.options,
        discussion: """
            Groups live in the cache file (device_groups, group_members); devices must be in the cache. While the
            daemon runs, changes go to it (its API's group method); without a daemon the command writes the file.
            """,
        actions: ["list", "create", "delete", "add", "remove"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let words = arguments.positionals
        guard let action = words.first else {
            throw CommandFailure(code: .usage, message: "missing an action\nUsage: \(spec.usage)")
        }
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        let name = words.count > 1 ? words[1] : nil
        let devices = Array(words.dropFirst(2))
        func needName() throws -> String {
            guard let name else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            return name
        }
        func knownDevices() throws {
            for device in devices where DeviceID.isValid(device) { _ = try requireKnown(device, configuration) }
        }
        switch action {
        case "list":
            let groups = try editing { try readLocal(configuration).groups() }
            if arguments.has("json") {
                Format.printJSON(.array(groups.map(\.json)))
            } else if groups.isEmpty {
                Console.out("no groups")
            } else {
                Console.out(Format.table(["GROUP", "DEVICES"], groups.map { [$0.name, $0.devices.joined(separator: ",")] }))
            }
        case "create":
            let name = try needName()
            try knownDevices()
            let group = DeviceGroup(json: try await apply(.createGroup(name, devices: devices), configuration))
            Console.out("group \(name) created with \(group?.devices.count ?? devices.count) device(s)")
        case "delete":
            let name = try needName()
            _ = try await apply(.deleteGroup(name), configuration)
            Console.out("group \(name) deleted")
        case "add", "remove":
            let name = try needName()
            guard !devices.isEmpty else { throw CommandFailure(code: .usage, message: "missing DEVICE\nUsage: \(spec.usage)") }
            if action == "add" { try knownDevices() }
            let change: LocalChange = action == "add"
                ? .addToGroup(name, devices: devices) : .removeFromGroup(name, devices: devices)
            let group = DeviceGroup(json: try await apply(change, configuration))
            Console.out("group \(name): \(group?.devices.joined(separator: ",") ?? "")")
        default:
            throw CommandFailure(code: .usage, message: "unknown action '\(action)'\nUsage: \(spec.usage)")
        }
        return .success
    }
}

/// `thing-agent network ...`: backup Wi-Fi networks kept for a device.
enum NetworkCommand: Command {
    static let spec = CommandSpec(
        name: "network",
        summary: "backup Wi-Fi networks of a device: list, add, remove",
        usage: "thing-agent network list DEVICE [--json] | add DEVICE SSID [--wifi-password-file PATH|- | --wifi-password P] [--priority N] | remove DEVICE SSID [options]",
        options: WifiPassword.options + [
            OptionSpec(name: "priority", valueName: "N", help: "higher is tried first (default 0)"),
            OptionSpec(name: "json", valueName: nil, help: "print JSON (passwords are never printed)"),
            daemonTimeoutOption,
        ] + CommonOptions.options,
        discussion: """
            Kept in the cache file (backup_networks); the device must be in the cache. The file is created 0600
            (only its owner reads it), since it holds these passwords in plain text. While the daemon runs,
            changes go to it (its API's network method); without a daemon the command writes the file.
            """,
        actions: ["list", "add", "remove"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let words = arguments.positionals
        guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "Usage: \(spec.usage)") }
        let action = words[0], device = words[1]
        guard DeviceID.isValid(device) else { throw CommandFailure(code: .usage, message: "'\(device)' is not a device id") }
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        _ = try requireKnown(device, configuration)
        switch action {
        case "list":
            let networks = try editing { try readLocal(configuration).backupNetworks(device) }
            if arguments.has("json") {
                Format.printJSON(.array(networks.map(\.json)))
            } else if networks.isEmpty {
                Console.out("\(device): no backup networks")
            } else {
                Console.out(Format.table(["SSID", "PRIORITY", "PASSWORD"],
                                   networks.map { [$0.ssid, "\($0.priority)", $0.password == nil ? "no" : "yes"] }))
            }
        case "add":
            guard words.count == 3 else { throw CommandFailure(code: .usage, message: "missing SSID\nUsage: \(spec.usage)") }
            var priority = 0
            if let text = arguments.value("priority") {
                guard let value = Int(text) else { throw CommandFailure(code: .usage, message: "--priority takes an integer") }
                priority = value
            }
            let password = try WifiPassword.read(arguments)
            let network = BackupNetwork(ssid: words[2], password: password, priority: priority)
            _ = try await apply(.addNetwork(device: device, network), configuration)
            Console.out("\(device): backup network \(words[2]) kept")
        case "remove":
            guard words.count == 3 else { throw CommandFailure(code: .usage, message: "missing SSID\nUsage: \(spec.usage)") }
            _ = try await apply(.removeNetwork(device: device, ssid: words[2]), configuration)
            Console.out("\(device): backup network \(words[2]) removed")
        default:
            throw CommandFailure(code: .usage, message: "unknown action '\(action)'\nUsage: \(spec.usage)")
        }
        return .success
    }
}
