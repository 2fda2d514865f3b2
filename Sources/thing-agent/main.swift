import Foundation
import ThingAgent

/// The subcommands, in the order `--help` lists them.
let commands: [any Command.Type] = [
    RunCommand.self, InfoCommand.self, DevicesCommand.self, WatchCommand.self, SetCommand.self, SceneCommand.self,
    GatewaysCommand.self, TransferCommand.self, FirmwareCommand.self, OTACommand.self, WifiScanCommand.self,
    SimulateCommand.self,
    DetailCommand.self, EditCommand.self, RemoveCommand.self, GroupCommand.self, LinkCommand.self, NetworkCommand.self,
    PairCommand.self,
    StatsCommand.self,
    VersionCommand.self,
]

@MainActor
func topLevelHelp() -> String {
    let width = (commands.map { $0.spec.name.count }.max() ?? 0) + 2
    let list = commands.map { "  \($0.spec.name.padding(toLength: width, withPad: " ", startingAt: 0))\($0.spec.summary)" }
    return """
        thing-agent keeps a fleet of IoT devices in view over MQTT: it caches every device's information,
        properties, status and signal in SQLite and sends them commands.

        Usage: thing-agent <command> [options]

        Commands:
        \(list.joined(separator: "\n"))

        Run 'thing-agent <command> --help' (or 'thing-agent help <command>') for a command's options;
        'thing-agent --version' prints the version.

        \(ExitCode.table)
        """
}

@MainActor
func main() async -> Int32 {
    var arguments = Array(CommandLine.arguments.dropFirst())
    if arguments == ["--version"] {
        Console.out(VersionCommand.line)
        return ExitCode.success.rawValue
    }
    // `help CMD` is `CMD --help`.
    if arguments.count == 2, arguments[0] == "help" {
        arguments = [arguments[1], "--help"]
    }
    guard let name = arguments.first, !["--help", "-h", "help"].contains(name) else {
        print(topLevelHelp())
        return arguments.isEmpty ? ExitCode.usage.rawValue : ExitCode.success.rawValue
    }
    arguments.removeFirst()
    guard let command = commands.first(where: { $0.spec.name == name }) else {
        Console.error("unknown command '\(name)'; run 'thing-agent --help' for the list")
        return ExitCode.usage.rawValue
    }
    do {
        let parsed = try command.spec.parse(arguments)
        if parsed.has("help") {
            print(command.spec.help)
            return ExitCode.success.rawValue
        }
        return try await command.run(parsed).rawValue
    } catch let error as UsageError {
        Console.error("\(error.message)\nRun 'thing-agent \(name) --help' for usage.")
        return ExitCode.usage.rawValue
    } catch let failure as CommandFailure {
        Console.error(failure.message)
        return failure.code.rawValue
    } catch let error as RequestError {
        Console.error(error.commandLineDescription)
        return error.exitCode.rawValue
    } catch {
        Console.error("\(error)")
        return ExitCode.failure.rawValue
    }
}

exit(await main())
