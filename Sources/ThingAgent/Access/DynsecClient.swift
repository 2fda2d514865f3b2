import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// One command of the dynamic-security plugin's control API.
enum DynsecCommand: Sendable {
    case getClient(String)
    /// `clientID`: the only client id these credentials connect with.
    case createClient(username: String, password: String, clientID: String?, roles: [String])
    case deleteClient(String)
    case setClientID(username: String, clientID: String)
    case addClientRole(username: String, role: String)
    case getRole(String)
    case createRole(String)
    case deleteRole(String)
    case addRoleACL(String, RoleACL)
    case removeRoleACL(String, RoleACL)
    case listRoles
    case listClients

    private static func client(_ user: String, _ password: String, _ clientID: String?,
                               _ roles: [String]) -> [(String, JSONValue)] {
        let roleList = JSONValue.array(roles.map { .object(JSONObject([("rolename", .string($0))])) })
        let fields: [(String, JSONValue)] = [
            ("command", .string("createClient")), ("username", .string(user)), ("password", .string(password)),
            ("roles", roleList),
        ]
        return fields + (clientID.map { [("clientid", JSONValue.string($0))] } ?? [])
    }

    var json: JSONObject {
        switch self {
        case .getClient(let user):
            JSONObject([("command", "getClient"), ("username", .string(user))])
        case .createClient(let user, let password, let clientID, let roles):
            JSONObject(Self.client(user, password, clientID, roles))
        case .deleteClient(let user):
            JSONObject([("command", "deleteClient"), ("username", .string(user))])
        case .setClientID(let user, let clientID):
            JSONObject([("command", "setClientId"), ("username", .string(user)), ("clientid", .string(clientID))])
        case .addClientRole(let user, let role):
            JSONObject([("command", "addClientRole"), ("username", .string(user)), ("rolename", .string(role))])
        case .getRole(let role):
            JSONObject([("command", "getRole"), ("rolename", .string(role))])
        case .createRole(let role):
            JSONObject([("command", "createRole"), ("rolename", .string(role))])
        case .deleteRole(let role):
            JSONObject([("command", "deleteRole"), ("rolename", .string(role))])
        case .addRoleACL(let role, let acl):
            JSONObject([("command", "addRoleACL"), ("rolename", .string(role)), ("acltype", .string(acl.type)),
                        ("topic", .string(acl.topic)), ("allow", .bool(acl.allow)),
                        ("priority", .integer(Int64(acl.priority)))])
        case .removeRoleACL(let role, let acl):
            JSONObject([("command", "removeRoleACL"), ("rolename", .string(role)), ("acltype", .string(acl.type)),
                        ("topic", .string(acl.topic))])
        case .listRoles:
            JSONObject([("command", "listRoles"), ("count", .integer(-1))])
        case .listClients:
            JSONObject([("command", "listClients"), ("count", .integer(-1))])
        }
    }
}

/// The plugin's answer to one command: `error` is its message when it refused.
struct DynsecAnswer: Sendable {
    let command: String
    let error: String?
    let data: JSONObject?

    var succeeded: Bool { error == nil }
    /// Done, or refused only because the change is already so: "not found" for a deletion or an ACL's removal,
    /// "already exists" for a role or an ACL made again. Nothing else: "Role not found" for `createClient` means
    /// the client was not made, and "Client already exists" means the name is someone else's.
    var alreadyDone: Bool {
        guard let error else { return true }
        switch command {
        case "deleteClient", "deleteRole", "removeRoleACL": return error.hasSuffix("not found")
        case "createRole", "addRoleACL": return error.hasSuffix("already exists")
        default: return false
        }
    }
}

struct DynsecError: Error, CustomStringConvertible {
    let description: String
}

/// Administers the broker over `$CONTROL/dynamic-security/v1` on a connection of its own (the agent's user, its
/// own client id), so that the agent's main connection is never the one the plugin drops when a command touches
/// the agent's user. Each batch carries a correlation id; its answers come back in order on the response topic.
final class DynsecClient: Sendable {
    static let requestTopic = "$CONTROL/dynamic-security/v1"
    static let responseTopic = "$CONTROL/dynamic-security/v1/response"

    private let client: MQTTClient
    private let waiting = Waiting()
    private let sequence = Atomic<UInt64>(0)
    let timeout: Duration

    init(configuration: MQTTConfiguration, timeout: Duration) throws {
        self.timeout = timeout
        let waiting = waiting
        client = try MQTTClient(configuration: configuration, streamMessages: false, onMessage: { message in
            Self.resolve(message, waiting)
        })
    }

    func connect() async throws {
        try await client.connect()
        try await client.subscribe(Self.responseTopic, qos: .atLeastOnce)
    }

    func disconnect() async {
        await client.disconnect()
        for continuation in waiting.takeAll() { continuation.resume(returning: nil) }
    }

    /// Sends the commands as one batch (the plugin applies them in order) and returns their answers in the same
    /// order. Throws when no answer came within `timeout` or the broker could not be reached.
    func run(_ commands: [DynsecCommand]) async throws -> [DynsecAnswer] {
        guard !commands.isEmpty else { return [] }
        let id = "ta-\(sequence.add(1, ordering: .relaxed).newValue)"
        let payload = JSONValue.object(JSONObject([("commands", .array(commands.map { command in
            var object = command.json
            object["correlationData"] = .string(id)
            return .object(object)
        }))])).serializedBytes()
        let client = client, waiting = waiting
        let answers: [DynsecAnswer]? = await withTimeout(timeout) {
            await withCheckedContinuation { continuation in
                waiting.add(id, continuation)
                Task {
                    do {
                        try await client.publish(Self.requestTopic, payload: payload, qos: .atLeastOnce)
                    } catch {
                        waiting.take(id)?.resume(returning: nil)
                    }
                }
            }
        } expire: {
            waiting.take(id)?.resume(returning: nil)
        }
        guard let answers else {
            throw DynsecError(description: "the broker's dynamic-security plugin did not answer within "
                              + "\(Int(timeout.seconds)) s (is the plugin loaded, and the agent's user its admin?)")
        }
        return answers
    }

    /// Sends commands whose answer cannot arrive: a change to the agent's own user disconnects this connection
    /// before the plugin answers. The caller checks the result afterwards.
    func send(_ commands: [DynsecCommand]) async throws {
        let payload = JSONValue.object(JSONObject([("commands", .array(commands.map { .object($0.json) }))]))
        try await client.publish(Self.requestTopic, payload: payload.serializedBytes(), qos: .atLeastOnce)
    }

    /// Waits until the connection is up again (after the plugin dropped it).
    func waitUntilConnected() async throws {
        let deadline = ContinuousClock.now + timeout
        while client.state != .connected {
            guard ContinuousClock.now < deadline else {
                throw DynsecError(description: "the administration connection did not come back within "
                                  + "\(Int(timeout.seconds)) s")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    var isConnected: Bool { client.state == .connected }

    private static func resolve(_ message: MQTTMessage, _ waiting: Waiting) {
        guard message.topic == responseTopic,
              let responses = (try? JSONParser.parse(message.payload))?["responses"]?.arrayValue else { return }
        let answers = responses.compactMap { $0.objectValue }.map { object in
            DynsecAnswer(command: object["command"]?.stringValue ?? "", error: object["error"]?.stringValue,
                         data: object["data"]?.objectValue)
        }
        guard let id = responses.first?["correlationData"]?.stringValue else { return }
        waiting.take(id)?.resume(returning: answers)
    }

    /// The batches waiting for their answers, by correlation id.
    private final class Waiting: Sendable {
        private let table = Mutex<[String: CheckedContinuation<[DynsecAnswer]?, Never>]>([:])

        func add(_ id: String, _ continuation: CheckedContinuation<[DynsecAnswer]?, Never>) {
            table.withLock { $0[id] = continuation }
        }

        func take(_ id: String) -> CheckedContinuation<[DynsecAnswer]?, Never>? {
            table.withLock { $0.removeValue(forKey: id) }
        }

        func takeAll() -> [CheckedContinuation<[DynsecAnswer]?, Never>] {
            table.withLock { table in
                defer { table.removeAll() }
                return Array(table.values)
            }
        }
    }
}
