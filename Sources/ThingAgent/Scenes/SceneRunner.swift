import JSON
import ThingAgentCore

/// Runs scenes: every action's property set, each checked against its device's thing model like any set.
public struct SceneRunner: Sendable {
    /// Sends one action's set and reports how it ended.
    typealias Set = @Sendable (_ deviceId: String, _ values: [String: JSONValue], _ timeout: Duration?,
                               _ force: Bool) async -> RequestOutcome
    private let set: Set

    public init(agent: Agent) {
        set = { await agent.sendPropertySet(deviceId: $0, $1, timeout: $2, force: $3) }
    }

    /// Runs the scene's sets through `set` (an `AgentClient`'s, through the daemon).
    init(set: @escaping Set) {
        self.set = set
    }

    /// Runs every action of `scene` and reports each outcome, in the scene's order. Devices are set concurrently;
    /// the actions for one device run one after the other in the scene's order, so the last one wins on the device.
    /// A failed action (invalid, offline, refused, timeout) does not stop the others.
    public func run(_ scene: Scene, timeout: Duration? = nil, force: Bool = false) async -> SceneReport {
        let started = ContinuousClock.now
        var byDevice: [String: [Int]] = [:]
        for (index, action) in scene.actions.enumerated() { byDevice[action.deviceId, default: []].append(index) }
        let set = set
        let outcomes = await withTaskGroup(of: [(Int, RequestOutcome)].self) { group in
            for indices in byDevice.values {
                let actions = indices.map { ($0, scene.actions[$0]) }
                group.addTask {
                    var done: [(Int, RequestOutcome)] = []
                    for (index, action) in actions {
                        done.append((index, await set(action.deviceId, action.properties, timeout, force)))
                    }
                    return done
                }
            }
            var all: [RequestOutcome?] = Array(repeating: nil, count: scene.actions.count)
            for await done in group {
                for (index, outcome) in done { all[index] = outcome }
            }
            return all.compactMap { $0 }
        }
        return SceneReport(scene: scene.name,
                           actions: zip(scene.actions, outcomes).map { SceneReport.ActionOutcome(action: $0, outcome: $1) },
                           elapsed: ContinuousClock.now - started)
    }
}

/// What running a scene did, action by action.
public struct SceneReport: Sendable, Equatable {
    public struct ActionOutcome: Sendable, Equatable {
        public let action: Scene.Action
        public let outcome: RequestOutcome
    }

    public let scene: String
    /// In the scene's order.
    public let actions: [ActionOutcome]
    public let elapsed: Duration

    /// True when every action succeeded.
    public var succeeded: Bool { actions.allSatisfy(\.outcome.succeeded) }
    public var failedCount: Int { actions.filter { !$0.outcome.succeeded }.count }
}
