import JSON
import ThingAgent

/// `thing-agent scene ...`: named property sets over several devices, kept in the cache file (and, read-only, in
/// a scenes file).
enum SceneCommand: Command {
    static let spec = CommandSpec(
        name: "scene",
        summary: "scenes: create, update, delete, list, or run one (property sets on several devices at once)",
        usage: """
            thing-agent scene list [--json] | scene run NAME [--json] [--timeout S] [--force] \
            | scene create NAME DEVICE:CODE=VALUE... [--description D] | scene update NAME DEVICE:CODE=VALUE... \
            [--description D] | scene delete NAME [options]
            """,
        options: [
            OptionSpec(name: "scenes", valueName: "FILE",
                       help: "list and run the scenes of this file only (the daemon imports scenesFile)"),
            OptionSpec(name: "description", valueName: "D", help: "the scene's description (create, update)"),
            OptionSpec(name: "json", valueName: nil, help: "print JSON"),
            OptionSpec(name: "timeout", valueName: "S", help: "seconds each action waits for its answer (default 10)"),
            OptionSpec(name: "force", valueName: nil, help: "send also to devices known to be offline"),
        ] + CommonOptions.options,
        discussion: """
            'run' sets every device of the scene at once (one device's actions in the file's order), checks each
            set against its device's thing model like 'set', and reports every action's outcome. It exits 0 when
            every action succeeded and 1 when any failed (6 when the broker cannot be used).

            Scenes live in the cache file: 'create' and 'update' check every value against its device's thing
            model (--models DIR; exit 3 when one is refused) and need devices in the cache; 'update' replaces the
            scene's actions. While the daemon runs, changes go to it (its API's scenes method); without a daemon
            the command writes the file. The daemon imports the configured scenesFile once (and at SIGHUP), never
            overwriting a scene changed since; 'list' and 'run' also show the file's scenes not imported yet.
            With --scenes FILE, 'list' and 'run' use that file alone.


            """ + ExitCode.table,
        actions: ["list", "run", "create", "update", "delete"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        var configuration = try CommonOptions.configuration(arguments)
        if let file = arguments.value("scenes") {
            do {
                try configuration.apply(key: "scenesFile", text: file, source: "--scenes")
            } catch {
                throw CommandFailure(code: .usage, message: error.description)
            }
        }
        try applyTimeout(arguments, to: &configuration)
        let words = arguments.positionals
        switch words.first {
        case "list":
            guard words.count == 1 else { throw unexpected(words[1]) }
            list(try available(configuration, fileOnly: arguments.value("scenes") != nil), json: arguments.has("json"))
            return .success
        case "create", "update":
            guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            let scene = Scene(name: words[1], description: arguments.value("description"),
                              actions: try actions(words.dropFirst(2)))
            for device in Set(scene.actions.map(\.deviceId)) where DeviceID.isValid(device) {
                _ = try requireKnown(device, configuration)
            }
            let change: LocalChange = words[0] == "create" ? .createScene(scene) : .updateScene(scene)
            _ = try await apply(change, configuration)
            Console.out("scene \(scene.name) \(words[0] == "create" ? "created" : "updated") with "
                + "\(scene.actions.count) action\(scene.actions.count == 1 ? "" : "s")")
            return .success
        case "delete":
            guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            guard words.count == 2 else { throw unexpected(words[2]) }
            _ = try await apply(.deleteScene(words[1]), configuration)
            Console.out("scene \(words[1]) deleted")
            return .success
        case "run":
            guard words.count >= 2 else { throw CommandFailure(code: .usage, message: "missing NAME\nUsage: \(spec.usage)") }
            guard words.count == 2 else { throw unexpected(words[2]) }
            let scenes = try available(configuration, fileOnly: arguments.value("scenes") != nil)
            guard let scene = scenes.scene(named: words[1]) else {
                throw CommandFailure(code: .failure, message: "unknown scene '\(words[1])'; the scenes: "
                    + scenes.all.map(\.name).joined(separator: ", "))
            }
            let force = arguments.has("force")
            let report = try await withRequests(configuration) { await $0.runScene(scene, force: force) }
            show(report, json: arguments.has("json"))
            return report.succeeded ? .success : .failure
        case let other?:
            throw CommandFailure(code: .usage, message: """
                unknown scene command '\(other)'; use list, run, create, update or delete
                Usage: \(spec.usage)
                """)
        case nil:
            throw CommandFailure(code: .usage, message: "missing list, run, create, update or delete\nUsage: \(spec.usage)")
        }
    }

    /// The scenes `list` and `run` see: with `fileOnly` (--scenes FILE) that file's; otherwise the cache's, and
    /// the configured scenes file's that were never imported (the daemon imports them when it next starts or
    /// reloads). Neither a cached scene nor a scenes file: a usage error.
    static func available(_ configuration: AgentConfiguration, fileOnly: Bool) throws -> Scenes {
        if fileOnly { return try load(configuration) }
        let local = try? readLocal(configuration)
        var scenes = try editing { try local?.scenes() } ?? []
        if configuration.scenesFile != nil {
            let imported = try editing { try local?.importedSceneNames() } ?? []
            let cached = Set(scenes.map(\.name))
            scenes += try load(configuration).all.filter { !imported.contains($0.name) && !cached.contains($0.name) }
        } else if scenes.isEmpty {
            throw CommandFailure(code: .usage, message: """
                no scenes file and no scenes in the cache: pass --scenes FILE, set scenesFile in the config, or \
                create one (thing-agent scene create NAME DEVICE:CODE=VALUE...)
                """)
        }
        return Scenes(scenes.sorted { $0.name < $1.name })
    }

    /// `DEVICE:CODE=VALUE` words into actions, one per device in the order the devices first appear.
    static func actions(_ words: ArraySlice<String>) throws -> [Scene.Action] {
        guard !words.isEmpty else {
            throw CommandFailure(code: .usage, message: "nothing to set: give at least one DEVICE:CODE=VALUE\nUsage: \(spec.usage)")
        }
        var actions: [Scene.Action] = []
        for word in words {
            guard let equals = word.firstIndex(of: "="), let member = DeviceLink.Member(String(word[..<equals])) else {
                throw CommandFailure(code: .usage, message: "'\(word)' is not DEVICE:CODE=VALUE\nUsage: \(spec.usage)")
            }
            let value = SetCommand.value(String(word[word.index(after: equals)...]))
            if let index = actions.firstIndex(where: { $0.deviceId == member.deviceId }) {
                guard actions[index].properties[member.code] == nil else {
                    throw CommandFailure(code: .usage, message: "\(member) is given twice")
                }
                actions[index].properties[member.code] = value
            } else {
                actions.append(Scene.Action(deviceId: member.deviceId, properties: [member.code: value]))
            }
        }
        return actions
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

    static func unexpected(_ word: String, usage: String = spec.usage) -> CommandFailure {
        CommandFailure(code: .usage, message: "unexpected argument '\(word)'\nUsage: \(usage)")
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
            + " (\(Format.milliseconds(report.elapsed.wholeMilliseconds)))")
        let rows = report.actions.map { entry -> [String] in
            let outcome = entry.outcome
            let detail = outcome.succeeded ? Format.assignments(entry.action.properties) : (outcome.error?.commandLineDescription ?? "")
            return [outcome.deviceId, outcome.outcome, outcome.msgId ?? "-", Format.milliseconds(outcome.elapsed.wholeMilliseconds), detail]
        }
        Console.out(Format.table(["DEVICE", "OUTCOME", "MSGID", "TIME", "DETAIL"], rows)
            .split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
    }

    static func setObject(_ action: Scene.Action) -> JSONValue {
        .object(JSONObject(action.properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))
    }
}
