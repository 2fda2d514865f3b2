import JSON
import ThingAgentCore

/// Scenes, group sets and links through the daemon's API (`scenes`, `links`, `groupSet`): the same operations as
/// on the `Agent`, for a process beside the daemon.
extension AgentClient {
    /// Every scene the daemon keeps.
    public func scenes() async throws(AgentClientError) -> [Scene] {
        let data = try await call("sceneList", JSONObject())
        return (data.arrayValue ?? []).compactMap { try? Scene(json: $0) }
    }

    /// Creates (`replacing` false) or replaces a scene; the daemon checks it against the thing models.
    @discardableResult
    public func saveScene(_ scene: Scene, replacing: Bool = false) async throws(AgentClientError) -> Scene {
        let change: LocalChange = replacing ? .updateScene(scene) : .createScene(scene)
        _ = try await call(change.method, change.request)
        return scene
    }

    public func deleteScene(named name: String) async throws(AgentClientError) {
        let change = LocalChange.deleteScene(name)
        _ = try await call(change.method, change.request)
    }

    /// Every multi-control link the daemon keeps.
    public func links() async throws(AgentClientError) -> [DeviceLink] {
        let data = try await call("linkList", JSONObject())
        return (data.arrayValue ?? []).compactMap { try? DeviceLink(json: $0) }
    }

    /// Creates a link; the daemon checks its codes and puts it to work at once.
    @discardableResult
    public func createLink(_ link: DeviceLink) async throws(AgentClientError) -> DeviceLink {
        let change = LocalChange.createLink(link)
        let data = try await call(change.method, change.request)
        return (try? DeviceLink(json: data)) ?? link
    }

    public func deleteLink(named name: String) async throws(AgentClientError) {
        let change = LocalChange.deleteLink(name)
        _ = try await call(change.method, change.request)
    }

    /// The same set for every member of group `name` (`Agent.setGroup`), answered as `GroupSetReport.json`.
    public func setGroup(_ name: String, _ values: [String: JSONValue], timeout: Duration? = nil,
                         force: Bool = false) async throws(AgentClientError) -> JSONValue {
        var request = JSONObject([
            ("group", .string(name)),
            ("data", .object(JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))),
            ("force", .bool(force)),
        ])
        if let timeout { request["timeout"] = .double(timeout.seconds) }
        return try await call("groupSet", request,
                              timeout: (timeout ?? configuration.requestTimeout) + Self.answerSlack)
    }
}
