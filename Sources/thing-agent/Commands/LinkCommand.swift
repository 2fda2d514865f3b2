import JSON
import ThingAgent

/// `thing-agent link ...`: multi-control links, codes on several devices that follow each other.
enum LinkCommand: Command {
    static let spec = CommandSpec(
        name: "link",
        summary: "multi-control links: codes on several devices that follow each other (create, list, delete)",
        usage: "thing-agent link create NAME DEVICE:CODE DEVICE:CODE [...] | list [--json] | delete NAME [options]",
        options: [OptionSpec(name: "json", valueName: nil, help: "print JSON"), daemonTimeoutOption]
            + CommonOptions.options,
        discussion: """
            While the daemon runs, when one member reports a new value for its code, the daemon sets every other
            member's code to it: no loops and no echoes (the report a member sends back because of the link's own
            set triggers nothing), members that already have the value get no set, offline members and values a
            member's model refuses are skipped and counted. Each propagation is an event on
            thing-agent/events/D/link.

            'create' checks the codes against the thing models (--models DIR): read-write codes of compatible types
            (bool with bool, numbers with numbers, enums with equal ranges); a member without a known model is
            refused (exit 3). Links live in the cache file; while the daemon runs, changes go to it (its API's
            links method) and take effect at once; without a daemon the command writes the file.

            """ + ExitCode.table,
        actions: ["create", "list", "delete"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let words = arguments.positionals
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        switch words.first {
        case "list":
            guard words.count == 1 else { throw SceneCommand.unexpected(words[1], usage: spec.usage) }
            let links = try editing { try readLocal(configuration).links() }
            if arguments.has("json") {
                Format.printJSON(.array(links.map(\.json)))
            } else if links.isEmpty {
                Console.out("no links")
            } else {
                Console.out(Format.table(["LINK", "MEMBERS"],
                                         links.map { [$0.name, $0.members.map(\.description).joined(separator: " ")] }))
            }
        case "create":
            guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            var members: [DeviceLink.Member] = []
            for word in words.dropFirst(2) {
                guard let member = DeviceLink.Member(word) else {
                    throw CommandFailure(code: .usage, message: "'\(word)' is not DEVICE:CODE\nUsage: \(spec.usage)")
                }
                members.append(member)
            }
            guard members.count >= 2 else {
                throw CommandFailure(code: .usage, message: "a link needs at least two DEVICE:CODE members\nUsage: \(spec.usage)")
            }
            for member in members where DeviceID.isValid(member.deviceId) { _ = try requireKnown(member.deviceId, configuration) }
            let link = try DeviceLink(json: try await apply(.createLink(DeviceLink(name: words[1], members: members)),
                                                            configuration))
            Console.out("link \(link.name) created: " + link.members.map(\.description).joined(separator: " "))
        case "delete":
            guard words.count == 2 else { throw CommandFailure(code: .usage, message: "delete takes one NAME\nUsage: \(spec.usage)") }
            _ = try await apply(.deleteLink(words[1]), configuration)
            Console.out("link \(words[1]) deleted")
        case let other?:
            throw CommandFailure(code: .usage, message: "unknown link command '\(other)'; use create, list or delete\nUsage: \(spec.usage)")
        case nil:
            throw CommandFailure(code: .usage, message: "missing create, list or delete\nUsage: \(spec.usage)")
        }
        return .success
    }
}
