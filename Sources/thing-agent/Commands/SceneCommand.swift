import JSON
import ThingAgent

/// `thing-agent scene list` and `thing-agent scene run NAME`: named property sets over several devices.
enum SceneCommand: Command {
    static let spec = CommandSpec(
        name: "scene",
        summary: "list the scenes, or run one: property sets on several devices at once",
        usage: "thing-agent scene list [--json] | scene run NAME [--json] [--timeout S] [--force] [options]",
        options: [
            OptionSpec(name: "scenes", valueName: "FILE", help: "the scenes file (config scenesFile)"),
            OptionSpec(name: "json", valueName: nil, help: "print JSON"),
            OptionSpec(name: "timeout", valueName: "S", help: "seconds each action waits for its answer (default 10)"),
            OptionSpec(name: "force", valueName: nil, help: "send also to devices known to be offline"),
        ] + CommonOptions.options,
        discussion: """
            'run' sets every device of the scene at once (one device's actions in the file's order), checks each
            set against its device's thing model like 'set', and reports every action's outcome. It exits 0 when
            every action succeeded and 1 when any failed (6 when the broker cannot be used).


            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        var configuration = try CommonOptions.configuration(arguments)
        if let file = arguments.value("scenes") {
            do {
                try configuration.apply(key: "scenesFile", text: file, source: "--scenes")
            } catch {
                throw CommandFailure(code: .usage, message: error.message)
            }
        }
        try applyTimeout(arguments, to: &configuration)
        let words = arguments.positionals
        switch words.first {
        case "list":
            guard words.count == 1 else { throw unexpected(words[1]) }
            list(try load(configuration), json: arguments.has("json"))
            return .success
        case "run":
            guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            guard words.count == 2 else { throw unexpected(words[2]) }
            let scenes = try load(configuration)
            guard let scene = scenes.scene(named: words[1]) else {
                throw CommandFailure(code: .failure, message: "unknown scene '\(words[1])'; the scenes in "
                    + "\(configuration.scenesFile ?? ""): \(scenes.all.map(\.name).joined(separator: ", "))")
            }
            let force = arguments.has("force")
            let report = try await withRequests(configuration) { await $0.runScene(scene, force: force) }
            show(report, json: arguments.has("json"))
            return report.succeeded ? .success : .failure
        case let other?:
            throw CommandFailure(code: .usage, message: "unknown scene command '\(other)'; use list or run\nUsage: \(spec.usage)")
        case nil:
            throw CommandFailure(code: .usage, message: "missing list or run\nUsage: \(spec.usage)")
        }
    }

    static func load(_ configuration: AgentConfiguration) throws -> Scenes {
        guard let file = configuration.scenesFile else {
            throw CommandFailure(code: .usage, message: "no scenes file: pass --scenes FILE or set scenesFile in the config")
        }
        do {
            return try Scenes(file: file)
        } catch {
            throw CommandFailure(code: .failure, message: error.description)
        }
    }

    static func unexpected(_ word: String) -> CommandFailure {
        CommandFailure(code: .usage, message: "unexpected argument '\(word)'\nUsage: \(spec.usage)")
    }

    static func list(_ scenes: Scenes, json: Bool) {
        if json {
            Format.printJSON(.array(scenes.all.map { scene in
                .object(JSONObject([
                    ("name", .string(scene.name)),
                    ("description", scene.description.map(JSONValue.string) ?? .null),
                    ("actions", .array(scene.actions.map { action in
                        .object(JSONObject([("device", .string(action.deviceId)), ("set", setObject(action))]))
                    })),
                ]))
            }))
            return
        }
        let rows = scenes.all.map { scene -> [String] in
            var devices: [String] = []
            for action in scene.actions where !devices.contains(action.deviceId) { devices.append(action.deviceId) }
            return [scene.name, String(scene.actions.count), devices.joined(separator: ","), scene.description ?? ""]
        }
        Console.out(Format.table(["NAME", "ACTIONS", "DEVICES", "DESCRIPTION"], rows))
    }

    static func show(_ report: SceneReport, json: Bool) {
        if json {
            Format.printJSON(.object(JSONObject([
                ("scene", .string(report.scene)),
                ("succeeded", .bool(report.succeeded)),
                ("failed", .integer(Int64(report.failedCount))),
                ("elapsedMs", .integer(report.elapsed.wholeMilliseconds)),
                ("actions", .array(report.actions.map { entry in
                    var object = entry.outcome.json
                    object["properties"] = setObject(entry.action)
                    return .object(object)
                })),
            ])))
            return
        }
        let total = report.actions.count
        Console.out("scene \(report.scene): " + (report.succeeded
            ? "all \(total) action\(total == 1 ? "" : "s") applied"
            : "\(report.failedCount) of \(total) action\(total == 1 ? "" : "s") failed")
            + " (\(report.elapsed.wholeMilliseconds) ms)")
        let rows = report.actions.map { entry -> [String] in
            let outcome = entry.outcome
            let detail = outcome.succeeded ? Format.assignments(entry.action.properties) : (outcome.error?.commandLineDescription ?? "")
            return [outcome.deviceId, outcome.outcome, outcome.msgId ?? "-", "\(outcome.elapsed.wholeMilliseconds) ms", detail]
        }
        Console.out(Format.table(["DEVICE", "OUTCOME", "MSGID", "TIME", "DETAIL"], rows)
            .split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
    }

    static func setObject(_ action: Scene.Action) -> JSONValue {
        .object(JSONObject(action.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
    }
}
