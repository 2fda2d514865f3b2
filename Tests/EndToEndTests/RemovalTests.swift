import Foundation
import JSON
import Testing
import TestSupport

/// `remove DEVICE` takes the device out of every group, scene action and link, in the file and in the daemon's
/// links at once, with the daemon and with the command's stand-in.
@Suite("thing-agent remove: groups, scenes, links", .serialized)
struct RemovalTests {
    static func json(_ harness: AgentHarness, _ arguments: [String]) async throws -> JSONValue {
        let result = try await harness.cli(arguments)
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        return try JSONParser.parse(result.stdout)
    }

    static func links(_ harness: AgentHarness) async throws -> [String: [String]] {
        var links: [String: [String]] = [:]
        for link in try await json(harness, ["link", "list", "--json"]).arrayValue ?? [] {
            links[link["name"]?.stringValue ?? ""] = link["members"]?.arrayValue?.compactMap { $0["device"]?.stringValue }
        }
        return links
    }

    static func scenes(_ harness: AgentHarness) async throws -> [String: [String]] {
        var scenes: [String: [String]] = [:]
        for scene in try await json(harness, ["scene", "list", "--json"]).arrayValue ?? [] {
            scenes[scene["name"]?.stringValue ?? ""] = scene["actions"]?.arrayValue?.compactMap { $0["device"]?.stringValue }
        }
        return scenes
    }

    @Test(.timeLimit(.minutes(4)))
    func aRemovedDeviceLeavesEveryGroupSceneAndLinkWithTheDaemonAndWithout() async throws {
        try await ScenesGroupsLinksTests.withDaemon { broker, harness, config in
            var followers: [String: SetFollower] = [:]
            for id in ["hall", "stairs", "porch"] {
                followers[id] = try await ScenesGroupsLinksTests.follower(id, product: "p-light-1", broker)
                _ = try await harness.waitForInfo(id) { $0["properties"]?["switch_1"] == false }
            }
            let (hall, stairs, porch) = (followers["hall"]!, followers["stairs"]!, followers["porch"]!)
            for command in [
                ["group", "create", "lights", "hall", "stairs"],
                ["scene", "create", "evening", "hall:switch_1=true", "stairs:switch_1=true"],
                ["scene", "create", "steps", "stairs:switch_1=true"],
                ["link", "create", "stairway", "hall:switch_1", "stairs:switch_1"],
                ["link", "create", "outside", "hall:switch_1", "stairs:switch_1", "porch:switch_1"],
            ] {
                let result = try await harness.cli(command + config)
                #expect(result.status == 0, "\(command): \(result.stderr)")
            }

            let removed = try await harness.cli(["remove", "stairs"] + config)
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(removed.stdout.contains("stairs: taken out of groups lights; scenes evening; deleted scenes (no "
                                            + "action left) steps; links outside; deleted links (one member left) "
                                            + "stairway"), "\(removed.stdout)")
            #expect(try await Self.links(harness) == ["outside": ["hall", "porch"]])
            #expect(try await Self.scenes(harness) == ["evening": ["hall"]])
            let groups = try await Self.json(harness, ["group", "list", "--json"])
            #expect(groups[0]?["devices"] == ["hall"], "\(groups)")

            // The daemon's links followed at once: the hall's change reaches the porch, not the removed stairs.
            try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
            try await waitUntil(timeout: .seconds(20)) { porch.sets == [#"{"switch_1":true}"#] }
            #expect(stairs.sets.isEmpty)

            // With no daemon the stand-in does the same: the porch goes, and with it the link it shared with the hall.
            try await harness.stopDaemon()
            let alone = try await harness.cli(["remove", "porch"] + config)
            #expect(alone.status == 0, "\(alone.stderr)")
            #expect(alone.stdout.contains("porch: taken out of deleted links (one member left) outside"), "\(alone.stdout)")
            #expect(try await Self.links(harness).isEmpty)
            #expect(try await Self.scenes(harness) == ["evening": ["hall"]])

            // A restarted daemon has no link left: the hall's next change sets no one.
            try await harness.startDaemon(config)
            try await hall.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
            _ = try await harness.waitForInfo("hall") { $0["properties"]?["switch_1"] == false }
            let scene = try await harness.cli(["scene", "run", "evening"] + config)
            #expect(scene.status == 0, "\(scene.stdout) \(scene.stderr)")
            try await waitUntil(timeout: .seconds(20)) { hall.sets == [#"{"switch_1":true}"#] }
            #expect(porch.sets == [#"{"switch_1":true}"#] && stairs.sets.isEmpty)
            for follower in followers.values { await follower.stop() }
        }
    }
}
