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
        options: [OptionSpec(name: "json", valueName: nil, help: "print JSON")] + CommonOptions.options,
        discussion: "Groups live in the cache file (device_groups, group_members); devices must be in the cache.")

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let words = arguments.positionals
        guard let action = words.first else {
            throw CommandFailure(code: .usage, message: "missing an action\nUsage: \(spec.usage)")
        }
        let configuration = try CommonOptions.configuration(arguments)
        let local = try openLocal(configuration)
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
            let groups = try local.groups()
            if arguments.has("json") {
                Format.printJSON(.array(groups.map { group in
                    .object(JSONObject([("name", .string(group.name)), ("devices", .array(group.devices.map(JSONValue.string))),
                                        ("createdAt", .integer(group.createdAt))]))
                }))
            } else if groups.isEmpty {
                Console.out("no groups")
            } else {
                Console.out(Format.table(["GROUP", "DEVICES"], groups.map { [$0.name, $0.devices.joined(separator: ",")] }))
            }
        case "create":
            let name = try needName()
            try knownDevices()
            let group = try editing { try local.createGroup(name, devices: devices) }
            Console.out("group \(group.name) created with \(group.devices.count) device(s)")
        case "delete":
            let name = try needName()
            guard try local.deleteGroup(name) else { throw CommandFailure(code: .failure, message: "no group named '\(name)'") }
            Console.out("group \(name) deleted")
        case "add", "remove":
            let name = try needName()
            guard !devices.isEmpty else { throw CommandFailure(code: .usage, message: "missing DEVICE\nUsage: \(spec.usage)") }
            if action == "add" {
                try knownDevices()
                try editing { try local.addToGroup(name, devices: devices) }
            } else {
                try editing { try local.removeFromGroup(name, devices: devices) }
            }
            let group = try local.group(named: name)
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
        ] + CommonOptions.options,
        discussion: """
            Kept in the cache file (backup_networks); the device must be in the cache. The file is created 0600
            (only its owner reads it), since it holds these passwords in plain text.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let words = arguments.positionals
        guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "Usage: \(spec.usage)") }
        let action = words[0], device = words[1]
        guard DeviceID.isValid(device) else { throw CommandFailure(code: .usage, message: "'\(device)' is not a device id") }
        let configuration = try CommonOptions.configuration(arguments)
        let local = try openLocal(configuration)
        _ = try requireKnown(device, configuration)
        switch action {
        case "list":
            let networks = try local.backupNetworks(device)
            if arguments.has("json") {
                Format.printJSON(.array(networks.map { network in
                    .object(JSONObject([("ssid", .string(network.ssid)), ("priority", .integer(Int64(network.priority))),
                                        ("hasPassword", .bool(network.password != nil)), ("addedAt", .integer(network.addedAt))]))
                }))
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
            try editing {
                try local.addBackupNetwork(device, BackupNetwork(ssid: words[2], password: password,
                                                                 priority: priority))
            }
            Console.out("\(device): backup network \(words[2]) kept")
        case "remove":
            guard words.count == 3 else { throw CommandFailure(code: .usage, message: "missing SSID\nUsage: \(spec.usage)") }
            guard try local.removeBackupNetwork(device, ssid: words[2]) else {
                throw CommandFailure(code: .failure, message: "\(device) has no backup network '\(words[2])'")
            }
            Console.out("\(device): backup network \(words[2]) removed")
        default:
            throw CommandFailure(code: .usage, message: "unknown action '\(action)'\nUsage: \(spec.usage)")
        }
        return .success
    }
}
