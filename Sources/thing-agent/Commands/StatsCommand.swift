import JSON
import ThingAgent

/// `thing-agent stats`: the daemon's receive-path counters, as it writes them into the cache file.
enum StatsCommand: Command {
    static let spec = CommandSpec(
        name: "stats",
        summary: "show the daemon's receive-path counters: received, applied, unchanged, for other clients, dropped",
        usage: "thing-agent stats [--json] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print a JSON object"),
        ] + CommonOptions.options,
        discussion: """
            Reads the counters the daemon keeps in the cache file's meta table: written with each batch it
            writes, every second while only counters move, and at a graceful stop. They count from the
            daemon's last start; every message received ends as applied, unchanged, for other clients (answers
            to another client's request, which every client hears) or dropped, so
            received = applied + unchanged + forOtherClients + dropped. Below them, when any: times corrected for
            clock skew (clockSkew), property codes over the limit (propertyLimit), transfers that moved nothing
            (untrustedTransfer), API requests refused for their reply topic, rate or retain flag
            (apiReplyRefused, apiRateLimited, apiRetainedRefused).
            Then the storage status the daemon keeps in <database>.storage: ok, degraded (a file fails, messages
            are still taken: the journal keeps them) or holding (new messages are left with the broker), with the
            failing file and error.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        let configuration = try CommonOptions.configuration(arguments)
        guard let stored = try openCache(configuration).statistics() else {
            throw CommandFailure(code: .failure, message: """
                no counters in \(configuration.cache.database): the daemon (thing-agent run) has not run on it yet
                """)
        }
        let stats = stored.statistics
        let storage = storage(of: configuration.cache.database)
        if arguments.has("json") {
            var dropped = JSONObject()
            for reason in DropReason.allCases { dropped[reason.rawValue] = .integer(Int64(stats.dropped[reason] ?? 0)) }
            var guarded = JSONObject()
            for reason in GuardReason.allCases { guarded[reason.rawValue] = .integer(Int64(stats.guarded[reason] ?? 0)) }
            Format.printJSON(.object(JSONObject([
                ("received", .integer(Int64(stats.received))), ("applied", .integer(Int64(stats.applied))),
                ("unchanged", .integer(Int64(stats.unchanged))),
                ("forOtherClients", .integer(Int64(stats.forOtherClients))), ("dropped", .object(dropped)),
                ("droppedTotal", .integer(Int64(stats.droppedTotal))), ("since", .integer(stored.since)),
                ("guarded", .object(guarded)),
                ("storage", storage?.json ?? .null),
            ])))
            return .success
        }
        let now = Timestamp.current
        var rows = [("received", stats.received), ("applied", stats.applied), ("unchanged", stats.unchanged),
                    ("for other clients", stats.forOtherClients), ("dropped", stats.droppedTotal)]
        for reason in DropReason.allCases {
            if let count = stats.dropped[reason] { rows.append(("  \(reason.rawValue)", count)) }
        }
        // Beside the outcomes: what was corrected or refused in input otherwise taken (docs/protocol.md,
        // "Rules the agent keeps").
        for reason in GuardReason.allCases {
            if let count = stats.guarded[reason] { rows.append((reason.rawValue, count)) }
        }
        let labelWidth = rows.map(\.0.count).max() ?? 0
        let numberWidth = rows.map { String($0.1).count }.max() ?? 0
        Console.out("Receive path since \(Format.date(stored.since)) (\(Format.age(stored.since, now: now)))")
        for (label, count) in rows {
            let number = String(count)
            Console.out("  \(label.padded(from: label.count, to: labelWidth))  "
                + String(repeating: " ", count: numberWidth - number.count) + number)
        }
        printStorage(storage)
        return .success
    }
}
