import FoundationEssentials
import Glibc
import JSON

/// `simulate --provision --credentials FILE`: what the simulated devices' activations gave them, kept in FILE as a
/// real device keeps it, so that a restarted simulator connects with it instead of pairing again (the agent
/// refuses a second activation of a bound device with 1013). Written after every activation, owner-only.
struct KeptCredentials {
    let path: String?
    /// Device id to its credentials; a sub-device (no connection of its own) maps to none.
    private(set) var devices: [String: DeviceCredentials?] = [:]

    /// Nothing kept: every device pairs.
    init() {
        path = nil
    }

    /// Reads FILE when it exists (a JSON object of device id to `{"username","password"}`, with `clientId` for an
    /// Alink device, `{}` for a sub-device).
    init(path: String) throws {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else { return }
        guard let data = FileManager.default.contents(atPath: path),
              let root = (try? JSONParser.parse(Array(data)))?.objectValue else {
            throw CommandFailure(code: .usage, message: "--credentials \(path): not a JSON object of device credentials")
        }
        for (id, entry) in root {
            if let user = entry["username"]?.stringValue, let password = entry["password"]?.stringValue {
                devices[id] = DeviceCredentials(username: user, password: password,
                                                clientID: entry["clientId"]?.stringValue)
            } else {
                devices[id] = .some(nil)
            }
        }
    }

    func has(_ id: String) -> Bool { devices[id] != nil }

    var credentials: [String: DeviceCredentials] { devices.compactMapValues { $0 } }

    mutating func add(_ id: String, _ credentials: DeviceCredentials?) throws {
        devices[id] = .some(credentials)
        guard let path else { return }
        var root = JSONObject()
        for (id, entry) in devices.sorted(by: { $0.key < $1.key }) {
            root[id] = .object(entry.map { credentials in
                var object = JSONObject([("username", .string(credentials.username)),
                                         ("password", .string(credentials.password))])
                if let clientID = credentials.clientID { object["clientId"] = .string(clientID) }
                return object
            } ?? JSONObject())
        }
        let temporary = path + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(JSONValue.object(root).serializedBytes()),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw CommandFailure(code: .failure, message: "cannot write \(temporary)")
        }
        guard rename(temporary, path) == 0 else {
            throw CommandFailure(code: .failure, message: "cannot replace \(path): \(String(cString: strerror(errno)))")
        }
    }
}
