import JSON
import ThingAgent

/// `thing-agent action DEVICE NAME [PARAM=VALUE...]`: an action (an Alink service) invoked and tracked to the
/// device's answer, as `set` is; its output parameters printed.
enum ActionCommand: Command {
    static let spec = CommandSpec(
        name: "action",
        summary: "invoke a device's action (a service) and wait for its answer and output",
        usage: "thing-agent action DEVICE NAME [PARAM=VALUE...] [--timeout S] [--json] [--force] [options]",
        options: [
            OptionSpec(name: "timeout", valueName: "S", help: "seconds to wait for the answer (default 10)"),
            OptionSpec(name: "json", valueName: nil, help: "print the outcome, with the output parameters, as JSON"),
            OptionSpec(name: "force", valueName: nil, help: "send even when the device is known to be offline"),
        ] + CommonOptions.options,
        discussion: """
            NAME is the action's identifier (letters, digits and _). VALUE is read as JSON when it parses (true,
            800, "text", null) and as a string otherwise, as for set. The native protocol carries it on
            R/D/thing/action/execute; an Alink device gets it as a service call (/sys/{pk}/{dn}/thing/service/NAME).
            The output parameters of the answer are printed one per line (PARAM = VALUE), or as `outputParams`
            with --json. While the daemon runs it sends the action; without one the command sends it itself.
            Thing models do not describe actions yet: the device answers for the parameters.


            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        guard let name = arguments.positionals.dropFirst().first else {
            throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)")
        }
        let words = arguments.positionals.dropFirst(2)
        let params = words.isEmpty ? [:] : try SetCommand.assignments(words)
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        let json = arguments.has("json"), force = arguments.has("force")
        let input = JSONObject(params.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        let outcome = try await withRequests(configuration) { requests in
            try await requests.invokeAction(deviceId: device, name: name, params: input, force: force)
        }
        if json {
            Format.printJSON(.object(outcome.json))
        } else if outcome.succeeded {
            Console.out("\(outcome.deviceId): \(name.terminalSafe()) done (msgId \(outcome.msgId ?? "?"), "
                + "\(Format.milliseconds(outcome.elapsed.wholeMilliseconds)))")
            for (key, value) in (outcome.outputParams ?? [:]).sorted(by: { $0.key < $1.key }) {
                Console.out("  \(key.terminalSafe()) = \(value.serialized().terminalSafe())")
            }
        } else if let error = outcome.error {
            Console.error(error.commandLineDescription)
        }
        return outcome.error?.exitCode ?? .success
    }
}
