import JSON
import ThingAgent

/// `thing-agent set --group G CODE=VALUE...`: the same set for every member of a group.
extension SetCommand {
    static let groupOption = OptionSpec(name: "group", valueName: "G",
                                        help: "set every member of group G (no DEVICE); offline members are skipped")

    static func runForGroup(_ group: String, _ arguments: ParsedArguments) async throws -> ExitCode {
        let values = try assignments(arguments.positionals[...])
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        let force = arguments.has("force")
        let report = try await withRequests(configuration) { requests in
            try await requests.setGroup(group, values, force: force)
        }
        return show(groupReport: report, values, json: arguments.has("json"))
    }

    /// The failures that have an exit code of their own, in the order in which one wins over the next when
    /// several members fail differently. Anything else (`tooManyInFlight`: the daemon's limit of requests waiting
    /// for answers, not the broker; `unsupported`, `cancelled`) is 1, an action that failed.
    static let rankedFailures: [(outcome: String, code: ExitCode)] = [
        ("invalid", .invalid), ("refused", .refused), ("timeout", .timeout), ("notSent", .noBroker),
    ]

    /// Prints a group's report (from `GroupSetReport.json`) and returns its exit code: 0 when every online
    /// member's set succeeded, else the first of 3 (a member's model refused), 4 (refused), 5 (no answer),
    /// 6 (not sent) among the outcomes, else 1; 1 for a group with no members.
    static func show(groupReport report: JSONValue, _ values: [String: JSONValue], json: Bool) -> ExitCode {
        let outcomes = report["outcomes"]?.arrayValue ?? []
        let words = outcomes.compactMap { $0["outcome"]?.stringValue }
        let failures = words.filter { $0 != "success" && $0 != "offline" }
        let code = failures.isEmpty ? .success : rankedFailures.first { failures.contains($0.outcome) }?.code ?? .failure
        let name = report["group"]?.stringValue ?? ""
        if json { Format.printJSON(report) }
        // A group whose members were all removed: nothing was done, which is not a success.
        guard !outcomes.isEmpty else {
            Console.error("group \(name) has no members")
            return .failure
        }
        if json { return code }
        let skipped = report["skippedOffline"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let sent = outcomes.count - skipped.count - words.filter { $0 == "invalid" }.count
        var head = "group \(name): \(words.filter { $0 == "success" }.count) of \(sent) set\(sent == 1 ? "" : "s") applied"
        if !skipped.isEmpty { head += "; offline, skipped: \(skipped.joined(separator: ", "))" }
        Console.out(head + " (\(Format.assignments(values)))")
        let rows = outcomes.map { outcome -> [String] in
            let word = outcome["outcome"]?.stringValue ?? "?"
            return [outcome["device"]?.stringValue ?? "?", word, outcome["msgId"]?.stringValue ?? "-",
                    Format.milliseconds(outcome["elapsedMs"]?.int64Value ?? 0),
                    word == "success" ? "" : outcome["message"]?.stringValue ?? ""]
        }
        if !rows.isEmpty {
            Console.out(Format.table(["DEVICE", "OUTCOME", "MSGID", "TIME", "DETAIL"], rows)
                .split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        }
        return code
    }
}

extension DeviceRequests {
    /// `set --group`: through the daemon (`groupSet`), or by the stand-in; `GroupSetReport.json` either way.
    func setGroup(_ group: String, _ values: [String: JSONValue], force: Bool) async throws -> JSONValue {
        switch sender {
        case .daemon(let client):
            return try await daemon {
                try await client.setGroup(group, values, timeout: configuration.requestTimeout, force: force)
            }
        case .here(let agent):
            do {
                return .object(try await agent.setGroup(group, values, force: force).json)
            } catch let error as EditError {
                throw CommandFailure(code: .failure, message: error.description)
            }
        }
    }
}

/// `thing-agent detail --group G`: a group's page, read from the cache file.
extension DetailCommand {
    static let groupOption = OptionSpec(name: "group", valueName: "G", help: "show group G's page instead of a device's")

    static func runForGroup(_ name: String, _ arguments: ParsedArguments) throws -> ExitCode {
        let configuration = try CommonOptions.configuration(arguments)
        let local = try readLocal(configuration)
        guard let group = try editing({ try local.group(named: name) }) else {
            throw CommandFailure(code: .failure, message: EditError.unknownGroup(name).description)
        }
        let reader = try openCache(configuration)
        let metadata = (try? local.allMetadata()) ?? [:]
        let now = Timestamp.current
        let members = group.devices.map { id in (id, try? reader.device(id), metadata[id]) }
        let online = members.filter { $0.1?.online == true }.count
        if arguments.has("json") {
            Format.printJSON(.object(JSONObject([
                ("group", .string(group.name)), ("createdAt", .integer(group.createdAt)),
                ("online", .integer(Int64(online))), ("count", .integer(Int64(members.count))),
                ("devices", .array(members.map { id, snapshot, meta in
                    snapshot.map { .object($0.json(now: now, metadata: meta)) }
                        ?? .object(JSONObject([("devId", .string(id)), ("known", .bool(false))]))
                })),
            ])))
            return .success
        }
        Console.out("Group \(group.name): \(members.count) device\(members.count == 1 ? "" : "s"), \(online) online")
        let rows = members.map { id, snapshot, meta -> [String] in
            let status = switch snapshot?.online { case true?: "online"; case false?: "offline"; case nil: "unknown" }
            let table = snapshot?.properties
            let properties = (table?.keys.sorted() ?? []).compactMap { code in
                table?[code].map { "\(code)=\(Format.value($0.value))" }
            }.joined(separator: " ")
            return [id, snapshot?.displayName(meta) ?? "-", meta?.room ?? "-", snapshot == nil ? "not cached" : status,
                    properties]
        }
        Console.out(Format.table(["DEVICE", "NAME", "ROOM", "STATUS", "PROPERTIES"], rows)
            .split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        return .success
    }
}
