import Foundation
import JSON
import Testing
import TestSupport

/// Scenes, group sets, links and a replacement's moves through the real executable, next to the real daemon.
@Suite("thing-agent scene, set --group, link, transfer moves", .serialized)
struct ScenesGroupsLinksTests {
    /// A device of `product`, online, with switch_1 false reported at t0, that follows the sets it gets.
    static func follower(_ id: String, product: String, _ broker: MosquittoBroker,
                         online: Bool = true) async throws -> SetFollower {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        try await device.info(#"{"name":"\#(id)","productId":"\#(product)"}"#, time: t0)
        try await device.status(online, time: t0)
        try await device.properties(#"{"switch_1":false}"#, time: t0)
        let follower = SetFollower(device)
        try await follower.start()
        return follower
    }

    /// A config naming the shipped models (and a scenes file when given), for the daemon and the CLI alike.
    static func config(_ harness: AgentHarness, scenes: String? = nil) throws -> [String] {
        let path = harness.directory + "/agent.json"
        let models = shippedModelsDirectory()
        try #"{"modelsDirectory":"\#(models)"\#(scenes.map { #","scenesFile":"\#($0)""# } ?? "")}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        return ["--config", path]
    }

    /// A broker and a daemon on the shipped models; `config` is for the CLI's calls too.
    static func withDaemon(_ body: (MosquittoBroker, AgentHarness, [String]) async throws -> Void) async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let config = try Self.config(harness)
            try await harness.startDaemon(config)
            try await body(broker, harness, config)
        }
    }

    static func sceneNames(_ harness: AgentHarness, _ config: [String]) async throws -> [String] {
        let list = try await harness.cli(["scene", "list", "--json"] + config)
        return try JSONParser.parse(list.stdout).arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
    }

    @Test(.timeLimit(.minutes(3)))
    func scenesAreCreatedChangedAndDeletedWhileTheDaemonRunsAndTheFileIsImportedOnce() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let file = harness.directory + "/scenes.json"
            try #"{"scenes":[{"name":"evening","actions":[{"device":"lamp","set":{"switch_1":true}}]},"#
                .appending(#"{"name":"quiet","actions":[{"device":"lamp","set":{"switch_1":false}}]}]}"#)
                .write(toFile: file, atomically: true, encoding: .utf8)
            let config = try Self.config(harness, scenes: file)
            try await harness.startDaemon(config)
            let lamp = try await Self.follower("lamp", product: "p-light-1", broker)
            let plug = try await Self.follower("plug", product: "p-plug-1", broker)
            _ = try await harness.waitForInfo("plug") { $0["properties"]?["switch_1"] == false }
            #expect(try await Self.sceneNames(harness, config) == ["evening", "quiet"])

            let create = try await harness.cli(["scene", "create", "movie", "lamp:bright_value=200", "plug:switch_1=false",
                                                "--description", "dim"] + config)
            #expect(create.status == 0, "\(create.stderr)")
            #expect(create.stdout.contains("scene movie created with 2 actions"))
            let refused = try await harness.cli(["scene", "create", "loud", "lamp:bright_value=5000"] + config)
            #expect(refused.status == 3, "\(refused.stderr)")
            #expect(refused.stderr.contains("scene 'loud', lamp: bright_value: 5000 is above the maximum 1000"))
            #expect(try await harness.cli(["scene", "create", "movie", "lamp:switch_1=true"] + config).status == 1)
            #expect(try await harness.cli(["scene", "create", "ghost", "nosuch:switch_1=true"] + config).status == 1)
            #expect(try await harness.cli(["scene", "create", "bad", "lamp-switch_1=true"] + config).status == 2)
            #expect(try await Self.sceneNames(harness, config) == ["evening", "movie", "quiet"])

            let update = try await harness.cli(["scene", "update", "evening", "lamp:switch_1=true",
                                                "lamp:bright_value=900"] + config)
            #expect(update.status == 0, "\(update.stderr)")
            let run = try await harness.cli(["scene", "run", "movie", "--json"] + config)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            try await waitUntil(timeout: .seconds(20)) {
                lamp.sets == [#"{"bright_value":200}"#] && plug.sets == [#"{"switch_1":false}"#]
            }
            #expect(try await harness.cli(["scene", "delete", "quiet"] + config).status == 0)
            #expect(try await harness.cli(["scene", "delete", "quiet"] + config).status == 1)

            // The file changes evening and quiet; a reload neither brings quiet back nor overwrites evening.
            try #"{"scenes":[{"name":"evening","actions":[{"device":"lamp","set":{"switch_1":false}}]},"#
                .appending(#"{"name":"quiet","actions":[{"device":"lamp","set":{"switch_1":false}}]},"#)
                .appending(#"{"name":"late","actions":[{"device":"plug","set":{"switch_1":true}}]}]}"#)
                .write(toFile: file, atomically: true, encoding: .utf8)
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGHUP)
            try await waitUntil(timeout: .seconds(20)) { daemon.log.contains("received SIGHUP; reloaded") }
            #expect(daemon.log.contains("1 new, 0 updated, 1 kept as cached"), "\(daemon.log)")
            #expect(daemon.log.contains("the cache's versions stay"), "\(daemon.log)")
            // Restarted, the daemon imports nothing again.
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            try await harness.startDaemon(config)
            let listed = try JSONParser.parse(try await harness.cli(["scene", "list", "--json"] + config).stdout)
            #expect(listed.arrayValue?.compactMap { $0["name"]?.stringValue } == ["evening", "late", "movie"])
            let evening = listed.arrayValue?.first { $0["name"] == "evening" }
            #expect(evening?["actions"]?[0]?["set"]?["bright_value"] == 900)
            #expect(listed.arrayValue?.first { $0["name"] == "movie" }?["description"] == "dim")
            await lamp.stop()
            await plug.stop()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aGroupSetSkipsAndListsOfflineMembersAndExitsWithTheFirstFailure() async throws {
        try await Self.withDaemon { broker, harness, config in
            let lamp = try await Self.follower("lamp", product: "p-light-1", broker)
            let plug = try await Self.follower("plug", product: "p-plug-1", broker)
            let away = try await Self.follower("away", product: "p-light-1", broker, online: false)
            _ = try await harness.waitForInfo("away") { $0["online"] == false }
            _ = try await harness.waitForInfo("plug") { $0["properties"]?["switch_1"] == false }
            #expect(try await harness.cli(["group", "create", "hall", "lamp", "plug", "away"]).status == 0)

            let set = try await harness.cli(["set", "--group", "hall", "switch_1=true"] + config)
            #expect(set.status == 0, "\(set.stdout) \(set.stderr)")
            #expect(set.stdout.contains("group hall: 2 of 2 sets applied; offline, skipped: away"), "\(set.stdout)")
            try await waitUntil(timeout: .seconds(20)) {
                lamp.sets == [#"{"switch_1":true}"#] && plug.sets == [#"{"switch_1":true}"#]
            }
            #expect(away.sets.isEmpty)

            // The plug's model has no bright_value: it is listed and gets nothing; the lamp is set.
            let invalid = try await harness.cli(["set", "--group", "hall", "bright_value=300", "--json"] + config)
            #expect(invalid.status == 3, "\(invalid.stdout) \(invalid.stderr)")
            let report = try JSONParser.parse(invalid.stdout)
            #expect(report["invalid"] == ["plug"])
            #expect(report["skippedOffline"] == ["away"])
            #expect(report["outcomes"]?.arrayValue?.compactMap { $0["outcome"]?.stringValue } == ["offline", "success", "invalid"])
            #expect(plug.sets.count == 1)

            // Forced, the offline member gets it too, and its silence is a timeout (5).
            await away.stop()
            let forced = try await harness.cli(["set", "--group", "hall", "switch_1=false", "--force", "--timeout", "1"] + config)
            #expect(forced.status == 5, "\(forced.stdout) \(forced.stderr)")
            #expect(forced.stdout.contains("away") && forced.stdout.contains("timeout"), "\(forced.stdout)")

            let page = try await harness.cli(["detail", "--group", "hall"])
            #expect(page.status == 0, "\(page.stderr)")
            #expect(page.stdout.contains("Group hall: 3 devices, 2 online"), "\(page.stdout)")
            let json = try JSONParser.parse(try await harness.cli(["detail", "--group", "hall", "--json"]).stdout)
            #expect(json["devices"]?.arrayValue?.compactMap { $0["devId"]?.stringValue } == ["away", "lamp", "plug"])
            #expect(try await harness.cli(["set", "--group", "nosuch", "switch_1=true"]).status == 1)
            #expect(try await harness.cli(["detail", "--group", "nosuch"]).status == 1)
            // A group whose members were all removed does nothing, and says so.
            #expect(try await harness.cli(["group", "create", "bare", "lamp"]).status == 0)
            #expect(try await harness.cli(["group", "remove", "bare", "lamp"]).status == 0)
            for json in [[], ["--json"]] {
                let empty = try await harness.cli(["set", "--group", "bare", "switch_1=true"] + json + config)
                #expect(empty.status == 1, "\(empty.stdout) \(empty.stderr)")
                #expect(empty.stderr.contains("group bare has no members"), "\(empty.stderr)")
            }

            // With no daemon, the command's stand-in sends the sets, by the same rules.
            try await harness.stopDaemon()
            let alone = try await harness.cli(["set", "--group", "hall", "switch_1=true"] + config)
            #expect(alone.status == 0, "\(alone.stdout) \(alone.stderr)")
            #expect(alone.stdout.contains("group hall: 2 of 2 sets applied; offline, skipped: away"), "\(alone.stdout)")
            #expect(lamp.sets.last == #"{"switch_1":true}"# && plug.sets.last == #"{"switch_1":true}"#)
            await lamp.stop()
            await plug.stop()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aLinkMadeWithTheCLIWorksInTheDaemonAtOnceAndAfterARestart() async throws {
        try await Self.withDaemon { broker, harness, config in
            let hall = try await Self.follower("hall", product: "p-light-1", broker)
            let stairs = try await Self.follower("stairs", product: "p-light-1", broker)
            let plug = try await Self.follower("plug", product: "p-plug-1", broker)
            _ = try await harness.waitForInfo("plug") { $0["properties"]?["switch_1"] == false }
            _ = try await harness.waitForInfo("stairs") { $0["properties"]?["switch_1"] == false }

            let incompatible = try await harness.cli(["link", "create", "bad", "hall:switch_1", "plug:countdown_1"] + config)
            #expect(incompatible.status == 3, "\(incompatible.stderr)")
            #expect(incompatible.stderr.contains("is not compatible with hall:switch_1 (bool)"), "\(incompatible.stderr)")
            #expect(try await harness.cli(["link", "create", "bad", "hall:switch_1"] + config).status == 2)
            let create = try await harness.cli(["link", "create", "stairway", "hall:switch_1", "stairs:switch_1"] + config)
            #expect(create.status == 0, "\(create.stderr)")
            #expect(create.stdout.contains("link stairway created: hall:switch_1 stairs:switch_1"))
            let list = try JSONParser.parse(try await harness.cli(["link", "list", "--json"]).stdout)
            #expect(list[0]?["members"]?[1]?["device"] == "stairs")

            try await hall.device.properties(#"{"switch_1":true}"#, time: t0 + 10)
            try await waitUntil(timeout: .seconds(20)) { stairs.sets == [#"{"switch_1":true}"#] }
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            try await harness.startDaemon(config)
            try await hall.device.properties(#"{"switch_1":false}"#, time: t0 + 20)
            try await waitUntil(timeout: .seconds(20)) {
                stairs.sets == [#"{"switch_1":true}"#, #"{"switch_1":false}"#]
            }
            #expect(hall.sets.isEmpty)
            #expect(try await harness.cli(["link", "delete", "stairway"]).status == 0)
            #expect(try await harness.cli(["link", "delete", "stairway"]).status == 1)
            #expect(try await harness.cli(["link", "list"]).stdout.contains("no links"))
            for follower in [hall, stairs, plug] { await follower.stop() }
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func transferPrintsWhatMovedBesidesTheSubDevices() async throws {
        try await Self.withDaemon { broker, harness, config in
            let devices = try await GatewayCommandsTests.fleet(broker)
            try await GatewayCommandsTests.waitForFleet(harness)
            #expect(try await harness.cli(["group", "create", "hall", "gwOld", "plug"]).status == 0)
            #expect(try await harness.cli(["edit", "gwOld", "--name", "Hall gateway"]).status == 0)
            #expect(try await harness.cli(["scene", "create", "night", "gwOld:led_switch=false"] + config).status == 0)

            let script = GatewayCommandsTests.Script()
            script.set([(.deviceConfigInit, ""), (.finish, "")])
            let playing = try await GatewayCommandsTests.play(script, on: devices[0])
            let transfer = try await harness.cli(["transfer", "gwNew", "--from", "gwOld"])
            #expect(transfer.status == 0, "\(transfer.stdout) \(transfer.stderr)")
            #expect(transfer.stdout.contains("moved from gwOld to gwNew: group hall; scene night; local name"),
                    "\(transfer.stdout)")
            let groups = try JSONParser.parse(try await harness.cli(["group", "list", "--json"]).stdout)
            #expect(groups[0]?["devices"] == ["gwNew", "plug"])
            #expect(try #require(try await harness.info("gwNew"))["name"] == "Hall gateway")
            playing.cancel()
            for device in devices { await device.disconnect() }
        }
    }

    /// The moves go with the re-linked sub-devices in the write of the finish: a daemon killed after it applied the
    /// finish in memory (journaled) but before that write moves everything when the journal is replayed, once.
    @Test(.timeLimit(.minutes(3)))
    func aDaemonKilledBeforeTheWriteMovesEverythingAtTheReplay() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let config = try Self.config(harness)
            try await harness.startDaemon(config)
            let devices = try await GatewayCommandsTests.fleet(broker)
            try await GatewayCommandsTests.waitForFleet(harness)
            #expect(try await harness.cli(["group", "create", "hall", "gwOld", "plug"]).status == 0)
            try await harness.stopDaemon()
            // An hour between writes: the finish stays in memory and the journal only.
            try await harness.startDaemon(config, environment: ["THING_AGENT_FLUSH_INTERVAL": "3600"])
            let script = GatewayCommandsTests.Script()
            script.set([(.finish, "")])
            let playing = try await GatewayCommandsTests.play(script, on: devices[0])
            let started = try await askAPI(broker.url, daemon: harness.clientID, "transfer",
                                           JSONObject([("device", "gwNew"), ("from", "gwOld")]))
            #expect(started["code"] == 0, "\(started)")
            try await waitUntil(timeout: .seconds(20)) {
                let info = try? await askAPI(broker.url, daemon: harness.clientID, "info", JSONObject([("device", "gwNew")]))
                return info?["data"]?["transfer"]?["statusName"] == "finish"
            }
            #expect(try await sqlite3(harness.database, "SELECT count(*) FROM gateway_replacements") == "0")
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGKILL)
            try await waitUntil(timeout: .seconds(20)) { !daemon.isRunning }

            try await harness.startDaemon(config)
            #expect(try await sqlite3(harness.database, "SELECT old_id, new_id FROM gateway_replacements") == "gwOld|gwNew")
            #expect(try await sqlite3(harness.database, "SELECT dev_id FROM group_members ORDER BY dev_id") == "gwNew\nplug")
            #expect(try await sqlite3(harness.database, "SELECT gateway_id FROM devices WHERE dev_id = 'sub1'") == "gwNew")
            playing.cancel()
            for device in devices { await device.disconnect() }
        }
    }

    /// With no daemon the command's stand-in is the cache's writer: it applies the finish, and moves as much.
    @Test(.timeLimit(.minutes(3)))
    func withNoDaemonTheStandInMovesTheSameAndAFailureMovesNothing() async throws {
        try await Self.withDaemon { broker, harness, config in
            let devices = try await GatewayCommandsTests.fleet(broker)
            try await GatewayCommandsTests.waitForFleet(harness)
            #expect(try await harness.cli(["group", "create", "hall", "gwOld", "plug"]).status == 0)
            #expect(try await harness.cli(["edit", "gwOld", "--room", "Hall"]).status == 0)
            try await harness.stopDaemon()

            let script = GatewayCommandsTests.Script()
            script.set([(.deviceConfigInit, ""), (.failed, "subdevice_unreachable")])
            let playing = try await GatewayCommandsTests.play(script, on: devices[0])
            let failed = try await harness.cli(["transfer", "gwNew", "--from", "gwOld"])
            #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
            #expect(!failed.stdout.contains("moved from"))
            let before = try JSONParser.parse(try await harness.cli(["group", "list", "--json"]).stdout)
            #expect(before[0]?["devices"] == ["gwOld", "plug"])

            script.set([(.deviceConfigInit, ""), (.finish, "")])
            let transfer = try await harness.cli(["transfer", "gwNew", "--from", "gwOld"])
            #expect(transfer.status == 0, "\(transfer.stdout) \(transfer.stderr)")
            #expect(transfer.stdout.contains("moved from gwOld to gwNew: group hall; local room"), "\(transfer.stdout)")
            let groups = try JSONParser.parse(try await harness.cli(["group", "list", "--json"]).stdout)
            #expect(groups[0]?["devices"] == ["gwNew", "plug"])
            #expect(try #require(try await harness.info("gwNew"))["room"] == "Hall")
            playing.cancel()
            for device in devices { await device.disconnect() }
        }
    }
}
