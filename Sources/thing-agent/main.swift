import Dispatch
import FoundationEssentials
import Glibc
import ThingAgent

let commands = CommandList.all

@MainActor
func topLevelHelp() -> String {
    let width = (commands.map { $0.spec.name.count }.max() ?? 0) + 2
    let list = commands.map { "  \($0.spec.name.padded(from: $0.spec.name.count, to: width))\($0.spec.summary)" }
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

/// What the command line asks for: an exit code already (help, a usage error, a command that reads only the
/// cache file), or a command that needs the async runtime (a broker, a daemon, timers).
enum Launch {
    case done(Int32)
    case async(any Command.Type, ParsedArguments, name: String)
}

@MainActor
func launch() -> Launch {
    var arguments = Array(CommandLine.arguments.dropFirst())
    if arguments == ["--version"] {
        Console.out(VersionCommand.line)
        return .done(ExitCode.success.rawValue)
    }
    // `help CMD` is `CMD --help`.
    if arguments.count == 2, arguments[0] == "help" {
        arguments = [arguments[1], "--help"]
    }
    guard let name = arguments.first, !["--help", "-h", "help"].contains(name) else {
        print(topLevelHelp())
        return .done(arguments.isEmpty ? ExitCode.usage.rawValue : ExitCode.success.rawValue)
    }
    arguments.removeFirst()
    guard let command = commands.first(where: { $0.spec.name == name }) else {
        Console.error("unknown command '\(name)'; run 'thing-agent --help' for the list")
        return .done(ExitCode.usage.rawValue)
    }
    do {
        let parsed = try command.spec.parse(arguments)
        if parsed.has("help") {
            print(command.spec.help)
            return .done(ExitCode.success.rawValue)
        }
        if let code = try command.runLocally(parsed) { return .done(code.rawValue) }
        return .async(command, parsed, name: name)
    } catch {
        return .done(exitCode(for: error, command: name))
    }
}

@MainActor
func run(_ command: any Command.Type, _ parsed: ParsedArguments, name: String) async -> Int32 {
    do {
        return try await command.run(parsed).rawValue
    } catch {
        return exitCode(for: error, command: name)
    }
}

/// Says what went wrong on stderr and gives the exit code for it.
func exitCode(for error: any Error, command name: String) -> Int32 {
    switch error {
    case let error as UsageError:
        Console.error("\(error.message)\nRun 'thing-agent \(name) --help' for usage.")
        return ExitCode.usage.rawValue
    case let failure as CommandFailure:
        Console.error(failure.message)
        return failure.code.rawValue
    case let error as RequestError:
        Console.error(error.commandLineDescription)
        return error.exitCode.rawValue
    default:
        Console.error("\(error)")
        return ExitCode.failure.rawValue
    }
}

// No top-level `await`: with one, the whole program would start as an async main, and every command (even `info`,
// which reads one row) would pay for the runtime's threads and the hand-overs between them (about 0.5 ms).
switch launch() {
case .done(let code):
    exit(code)
case .async(let command, let parsed, let name):
    Task { exit(await run(command, parsed, name: name)) }
    dispatchMain()
}
