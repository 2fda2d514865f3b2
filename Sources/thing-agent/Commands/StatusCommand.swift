import JSON
import MQTT
import Synchronization
import ThingAgent

/// `thing-agent status`: which daemon is up and, in a group, which instance is active, which stand by, and since
/// when, as their retained announcements say.
enum StatusCommand: Command {
    static let spec = CommandSpec(
        name: "status",
        summary: "show whether the daemon runs; in a group, which instance is active and which stand by, since when",
        usage: "thing-agent status [--json] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print a JSON object"),
        ] + CommonOptions.options,
        discussion: """
            Reads the daemons' retained announcements on thing-agent/agents/<client-id>/status from the
            broker. Without a group (agentGroup, --group-name) it shows the daemon of --client-id: online or
            offline, and since when. In a group it lists every instance that announced itself in it: online
            or offline, active or standby, and since when it holds that role.
            Exit 0 when exactly one instance is active and online (without a group: the daemon is online),
            1 otherwise (none, or two active at once while a partition lasts), 6 without the broker.
            """)

    /// One announcement.
    struct Instance: Sendable {
        var id: String
        var online: Bool
        var group: String?
        var role: String?
        var since: Int64?
        var time: Int64?

        var json: JSONValue {
            .object(JSONObject([("instance", .string(id)), ("online", .bool(online)),
                                ("role", role.map(JSONValue.string) ?? .null),
                                ("since", since.map(JSONValue.integer) ?? .null),
                                ("announcedAt", time.map(JSONValue.integer) ?? .null)]))
        }
    }

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        let configuration = try CommonOptions.configuration(arguments)
        let heard = try await announcements(configuration)
        let group = configuration.group.name
        let shown = heard.filter { group == nil ? $0.id == configuration.mqtt.clientID : $0.group == group }
            .sorted { $0.id < $1.id }
        let active = shown.filter { $0.online && (group == nil || $0.role == "active") }
        if arguments.has("json") {
            var object = JSONObject([("group", group.map(JSONValue.string) ?? .null),
                                     ("active", active.count == 1 ? .string(active[0].id) : .null),
                                     ("instances", .array(shown.map(\.json)))])
            if group != nil { object["failoverTimeout"] = .double(configuration.group.failoverTimeout.seconds) }
            Format.printJSON(.object(object))
        } else {
            print(text(group: group, clientID: configuration.mqtt.clientID, shown: shown, active: active))
        }
        return active.count == 1 ? .success : .failure
    }

    static func text(group: String?, clientID: String, shown: [Instance], active: [Instance]) -> String {
        var lines: [String] = []
        if let group {
            switch active.count {
            case 0: lines.append("group \(group): no active instance online")
            case 1: lines.append("group \(group): \(active[0].id) is active since \(active[0].since.map(Format.date) ?? "?")")
            default: lines.append("group \(group): \(active.count) instances say they are active (a partition?): "
                                  + active.map(\.id).joined(separator: ", "))
            }
        } else if shown.isEmpty {
            lines.append("no announcement of the daemon \(clientID) on the broker: it never ran there")
        }
        guard !shown.isEmpty else { return lines.joined(separator: "\n") }
        lines.append(Format.table(["INSTANCE", "STATUS", "ROLE", "SINCE", "ANNOUNCED"], shown.map { instance in
            [instance.id.terminalSafe(), instance.online ? "online" : "offline",
             instance.online ? (instance.role ?? (group == nil ? "active" : "-")) : "-",
             instance.since.map(Format.date) ?? "-", instance.time.map(Format.date) ?? "-"]
        }))
        return lines.joined(separator: "\n")
    }

    /// The retained announcements the broker holds: those that come within a moment of the subscription (the
    /// broker sends retained messages right after it), until none came for a quarter second.
    static func announcements(_ configuration: AgentConfiguration) async throws -> [Instance] {
        let client: MQTTClient
        do {
            client = try MQTTClient(configuration: configuration.mqtt.connection(clientID: configuration.commandClientID))
            try await client.connect()
        } catch {
            throw CommandFailure(code: .noBroker, message: "cannot reach the broker \(configuration.mqtt.broker): \(error)")
        }
        let messages = client.messages
        do {
            try await client.subscribe("thing-agent/agents/+/status", qos: .atMostOnce)
        } catch {
            await client.disconnect()
            throw CommandFailure(code: .noBroker, message: "cannot subscribe to the announcements: \(error)")
        }
        let collected = await withTimeout(.seconds(3)) { () async -> [Instance] in
            let found = Collected()
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await message in messages where message.retain {
                        if let instance = Self.instance(message) { found.add(instance) }
                    }
                }
                group.addTask {
                    // Quiet for 250 ms (after at least 500 ms): the retained ones are all in.
                    try? await Task.sleep(for: .milliseconds(500))
                    while !Task.isCancelled, !found.quiet(for: .milliseconds(250)) {
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                }
                await group.next()
                group.cancelAll()
            }
            return found.all
        }
        await client.disconnect()
        return collected
    }

    static func instance(_ message: MQTTMessage) -> Instance? {
        let parts = message.topic.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, let object = (try? JSONParser.parse(message.payload))?.objectValue else { return nil }
        return Instance(id: String(parts[2]), online: object["status"]?.stringValue == "online",
                        group: object["group"]?.stringValue, role: object["role"]?.stringValue,
                        since: object["since"]?.int64Value, time: object["time"]?.int64Value)
    }
}

/// The announcements heard so far, and when the last came.
private final class Collected: Sendable {
    private let state = Mutex<(instances: [String: StatusCommand.Instance], last: ContinuousClock.Instant)>(([:], .now))

    func add(_ instance: StatusCommand.Instance) {
        state.withLock {
            $0.instances[instance.id] = instance
            $0.last = .now
        }
    }

    func quiet(for duration: Duration) -> Bool { state.withLock { ContinuousClock.now - $0.last >= duration } }

    var all: [StatusCommand.Instance] { state.withLock { Array($0.instances.values) } }
}
