import ThingAgent

/// `thing-agent version` (also `thing-agent --version`): the version, as the package names it.
enum VersionCommand: Command {
    static let spec = CommandSpec(
        name: "version",
        summary: "print the version (also: thing-agent --version)",
        usage: "thing-agent version",
        options: [OptionSpec(name: "help", valueName: nil, help: "show this help")])

    static var line: String { "thing-agent \(ThingAgentVersion.current)" }

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        Console.out(line)
        return .success
    }
}
