import JSON
import ThingAgentCore

/// What a property set sent to every member of a group did (`Agent.setGroup`).
public struct GroupSetReport: Sendable, Equatable {
    public let group: String
    /// One outcome per member, in the group's order: the set's, or why nothing was sent (invalid for the member's
    /// model, offline).
    public let outcomes: [RequestOutcome]
    public let elapsed: Duration

    /// Members skipped because they are known to be offline (nothing sent; `force` sends anyway).
    public var skippedOffline: [String] {
        outcomes.filter { if case .deviceOffline? = $0.error { true } else { false } }.map(\.deviceId)
    }

    /// Members whose thing model refuses the values (nothing sent to them).
    public var invalid: [String] {
        outcomes.filter { if case .invalid? = $0.error { true } else { false } }.map(\.deviceId)
    }

    /// True when every set that could be sent (all but the offline members') succeeded, and no member refused the
    /// values by its model.
    public var succeeded: Bool {
        outcomes.allSatisfy { outcome in
            if case .deviceOffline? = outcome.error { return true }
            return outcome.succeeded
        }
    }

    public var json: JSONObject {
        JSONObject([
            ("group", .string(group)), ("succeeded", .bool(succeeded)),
            ("skippedOffline", .array(skippedOffline.map(JSONValue.string))),
            ("invalid", .array(invalid.map(JSONValue.string))),
            ("elapsedMs", .integer(elapsed.milliseconds)),
            ("outcomes", .array(outcomes.map { .object($0.apiJSON) })),
        ])
    }
}

extension Agent {
    /// Sends the same property set to every member of the group `name`, at once: each member's set is checked
    /// against its own thing model (a member that refuses it gets nothing), members known to be offline are
    /// skipped unless `force`, and every outcome is reported.
    public func setGroup(_ name: String, _ values: [String: JSONValue], timeout: Duration? = nil,
                         force: Bool = false) async throws -> GroupSetReport {
        guard let group = try requireLocal().group(named: name) else { throw EditError.unknownGroup(name) }
        let started = ContinuousClock.now
        let outcomes = await withTaskGroup(of: (Int, RequestOutcome).self) { tasks in
            for (index, member) in group.devices.enumerated() {
                tasks.addTask {
                    (index, await self.sendPropertySet(deviceId: member, values, timeout: timeout, force: force))
                }
            }
            var all = [RequestOutcome?](repeating: nil, count: group.devices.count)
            for await (index, outcome) in tasks { all[index] = outcome }
            return all.compactMap { $0 }
        }
        return GroupSetReport(group: name, outcomes: outcomes, elapsed: ContinuousClock.now - started)
    }
}
