import JSON
import ThingAgent

/// `thing-agent set DEVICE CODE=VALUE...`: a property set that ends in a clear answer.
enum SetCommand: Command {
    static let spec = CommandSpec(
        name: "set",
        summary: "set device properties and wait for the device's answer",
        usage: "thing-agent set DEVICE CODE=VALUE... | set --group G CODE=VALUE... [--timeout S] [--json] [--force] [options]",
        options: [
            OptionSpec(name: "timeout", valueName: "S", help: "seconds to wait for the answer (default 10)"),
            OptionSpec(name: "json", valueName: nil, help: "print the outcome as JSON"),
            OptionSpec(name: "force", valueName: nil, help: "send even when the device is known to be offline"),
            groupOption,
        ] + CommonOptions.options,
        discussion: """
            VALUE is read as JSON when it parses (true, 800, "text", null) and as a string otherwise, so
            mode=white sends "white"; quote a string that would parse: label='"800"'.
            A device whose cached productId has a thing model (--models DIR) is checked first; an invalid set
            publishes nothing. The cache is not changed by a set: the device's next property report changes it.
            While the daemon runs, it sends the set (its API's set method) and the command waits for its answer;
            without a daemon the command sends it itself, with a client id of its own.

            With --group G the set goes to every member of the group at once (through the daemon when it runs),
            each checked against its own model: a member whose model refuses it is listed and gets nothing,
            offline members are listed and skipped (--force sends anyway). Exit 0 only when every online member's
            set succeeded; otherwise the first of 3 (model), 4 (refused), 5 (no answer), 6 (not sent) that
            occurred, else 1 (too many requests in flight, for one); 1 when the group has no members.


            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        if let group = arguments.value("group") { return try await runForGroup(group, arguments) }
        let device = try deviceArgument(arguments)
        let values = try assignments(arguments.positionals.dropFirst())
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        let json = arguments.has("json"), force = arguments.has("force")
        let requests = try await DeviceRequests.open(configuration, command: spec.name)
        return try await requests.closing {
            // Checked before connecting: an invalid set or an offline device answers without a broker.
            do throws(RequestError) {
                try requests.checkPropertySet(deviceId: device, values, force: force)
            } catch {
                return report(RequestOutcome(deviceId: device, kind: .setProperties, msgId: nil,
                                             result: .failure(error), elapsed: .zero), values, json: json)
            }
            do {
                try await requests.connect()
            } catch let failure as CommandFailure where json {
                return report(RequestOutcome(deviceId: device, kind: .setProperties, msgId: nil,
                                             result: .failure(.notSent(reason: failure.message)), elapsed: .zero),
                              values, json: json)
            }
            return report(try await requests.sendPropertySet(deviceId: device, values, force: force), values, json: json)
        }
    }

    /// `CODE=VALUE` words into values; anything else is a usage error.
    static func assignments(_ words: ArraySlice<String>) throws -> [String: JSONValue] {
        guard !words.isEmpty else {
            throw CommandFailure(code: .usage, message: "nothing to set: give at least one CODE=VALUE\nUsage: \(spec.usage)")
        }
        var values: [String: JSONValue] = [:]
        for word in words {
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else {
                throw CommandFailure(code: .usage, message: "'\(word)' is not CODE=VALUE\nUsage: \(spec.usage)")
            }
            let code = String(word[..<equals])
            guard values[code] == nil else { throw CommandFailure(code: .usage, message: "\(code) is given twice") }
            values[code] = value(String(word[word.index(after: equals)...]))
        }
        return values
    }

    /// JSON when the text parses as JSON, else the text as a string.
    static func value(_ text: String) -> JSONValue {
        (try? JSONParser.parse(text)) ?? .string(text)
    }

    /// Prints the outcome (JSON on stdout with --json; else a line on stdout, or the error on stderr) and
    /// returns its exit code.
    static func report(_ outcome: RequestOutcome, _ values: [String: JSONValue], json: Bool) -> ExitCode {
        if json {
            var object = outcome.json
            object["properties"] = .object(JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
            Format.printJSON(.object(object))
        } else if outcome.succeeded {
            Console.out("\(outcome.deviceId): applied \(Format.assignments(values)) "
                + "(msgId \(outcome.msgId ?? "?"), \(Format.milliseconds(outcome.elapsed.wholeMilliseconds)))")
        } else if let error = outcome.error {
            Console.error(error.commandLineDescription)
        }
        return outcome.error?.exitCode ?? .success
    }
}
