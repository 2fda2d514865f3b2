import FoundationEssentials
import JSON
import ThingAgent

extension Command {
    /// Opens the local store of the cache file (edits, groups, networks), which must exist, for writing: only while
    /// holding the cache's lock (`apply`).
    static func openLocal(_ configuration: AgentConfiguration) throws -> LocalStore {
        try openExisting(configuration, verb: "open") { try LocalStore(path: $0) }
    }

    /// Fails with exit 1 unless the device is in the cache file.
    static func requireKnown(_ device: String, _ configuration: AgentConfiguration) throws -> DeviceSnapshot {
        guard let snapshot = try openCache(configuration).device(device) else {
            throw CommandFailure(code: .failure, message: "unknown device '\(device)': it is not in the cache \(configuration.cache.database)")
        }
        return snapshot
    }

    /// Runs a local-store change, turning its errors into exit codes (bad values 2, unknown group 1).
    static func editing<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as EditError {
            switch error {
            case .invalid: throw CommandFailure(code: .usage, message: error.description)
            case .modelRefused: throw CommandFailure(code: .invalid, message: "invalid: \(error.description)")
            default: throw CommandFailure(code: .failure, message: error.description)
            }
        }
    }
}

/// `thing-agent edit DEVICE`: local name, room, icon and offline-warning switch.
enum EditCommand: Command {
    static let spec = CommandSpec(
        name: "edit",
        summary: "rename a device, set its room and icon, switch its offline warning (kept locally)",
        usage: "thing-agent edit DEVICE [--name N] [--room R] [--icon URL] [--offline-warning on|off] [--json] [options]",
        options: [
            OptionSpec(name: "name", valueName: "N", help: "local name (\"\" shows the reported name again)"),
            OptionSpec(name: "room", valueName: "R", help: "room (\"\" clears it)"),
            OptionSpec(name: "icon", valueName: "URL", help: "icon URL (\"\" clears it)"),
            OptionSpec(name: "offline-warning", valueName: "on|off", help: "warn when the device stays offline"),
            OptionSpec(name: "json", valueName: nil, help: "print the metadata as JSON"),
            daemonTimeoutOption,
        ] + CommonOptions.options,
        discussion: """
            Kept in the cache file (table device_meta), apart from what the device reports: a later info report
            does not overwrite the local name. While the daemon runs, the edit goes to it (its API's edit method),
            so its answers show it at once; without a daemon the command writes the file itself. Without any
            option, prints the current metadata.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        guard arguments.positionals.count == 1 else {
            throw CommandFailure(code: .usage, message: "edit takes one DEVICE\nUsage: \(spec.usage)")
        }
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        var edit = DeviceEdit(name: arguments.value("name"), room: arguments.value("room"), icon: arguments.value("icon"))
        if let warning = arguments.value("offline-warning") {
            switch warning {
            case "on", "true", "yes": edit.offlineWarning = true
            case "off", "false", "no": edit.offlineWarning = false
            default: throw CommandFailure(code: .usage, message: "--offline-warning takes on or off")
            }
        }
        let snapshot = try requireKnown(device, configuration)
        let metadata: DeviceMetadata
        if edit.isEmpty {
            metadata = try editing { try readLocal(configuration).metadata(device) }
        } else {
            let answer = try await apply(.edit(device: device, edit), configuration)
            guard let applied = DeviceMetadata(json: answer) else {
                throw CommandFailure(code: .failure, message: "the edit gave no metadata back: \(answer.serialized())")
            }
            metadata = applied
        }
        if arguments.has("json") {
            Format.printJSON(.object(metadata.json))
        } else {
            Console.out(text(snapshot, metadata))
        }
        return .success
    }

    static func text(_ device: DeviceSnapshot, _ metadata: DeviceMetadata) -> String {
        """
        \(device.id): name "\((device.displayName(metadata) ?? "").terminalSafe())"\(metadata.name == nil ? " (reported)" : ""), \
        room \((metadata.room ?? "-").terminalSafe()), icon \((metadata.icon ?? "-").terminalSafe()), offline warning \(metadata.offlineWarning ? "on" : "off")
        """
    }
}

/// `thing-agent remove DEVICE`: forget a device and ask it to unbind.
enum RemoveCommand: Command {
    static let spec = CommandSpec(
        name: "remove",
        summary: "remove a device: clear its retained topics, publish the unbind request, drop it from the cache",
        usage: "thing-agent remove DEVICE [--timeout S] [options]",
        options: [daemonTimeoutOption] + CommonOptions.options,
        discussion: """
            Publishes empty retained messages on R/D/thing/status and R/D/thing/info, then {"msgId","time"} on
            R/D/thing/unbind (QoS 1), and deletes the device with its local metadata, group memberships, scene
            actions, link memberships and backup networks from the cache file (a scene left with no action and a
            link left with one member are deleted; the output names them). With provisioning, the device's broker
            client and role are deleted too; with no daemon the command does it when its broker user may
            administer the plugin (the agent's user), else it says that the daemon's next start will. While the daemon runs, it does all of this (its API's remove
            method); without a daemon the command does it. A later message from the device makes it known again.

            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        _ = try requireKnown(device, configuration)
        let removal: DeviceRemoval
        switch try await writeAccess(configuration) {
        case .daemon(let clientID):
            do {
                removal = DeviceRemoval(json: try await DaemonAPI(configuration: configuration, daemon: clientID)
                    .call("remove", JSONObject([("device", .string(device))])), device: device)
            } catch let refusal as DaemonAPI.Refusal {
                throw CommandFailure(code: refusal.code == 503 ? .noBroker : .failure, message: refusal.message)
            }
        case .here(let lock):
            defer { withExtendedLifetime(lock) {} }
            do {
                let agent = try DeviceRequests.makeStandIn(configuration)
                try await connect(agent, configuration)
                do {
                    removal = try await agent.removeDevice(device)
                } catch {
                    await agent.stop()
                    if let error = error as? RequestError { throw CommandFailure(code: .noBroker, message: error.description) }
                    throw CommandFailure(code: .failure, message: "\(error)")
                }
                await agent.stop()
            }
        }
        Console.out("\(device): removed (unbind published on \(configuration.topics.unbind(device)))")
        if removal.touchedAnything { Console.out("\(device): taken out of \(removal.summary)") }
        if let credentials = removal.credentialsSummary { Console.out("\(device): \(credentials)") }
        return .success
    }
}
