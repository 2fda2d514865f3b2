import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// While the daemon runs it is the cache's only writer: the CLI's edits, groups, networks and removals go to it
/// over its API, so its answers show them at once.
@Suite("one writer: the CLI writes through the daemon", .serialized)
struct OneWriterTests {
    /// One request to the daemon's API with an MQTT client of the test's own, and its answer.
    static func ask(_ harness: AgentHarness, _ method: String, _ request: JSONObject) async throws -> JSONValue {
        try await askAPI(harness.broker.url, daemon: harness.clientID, method, request)
    }

    /// A command that does the daemon's work while none runs holds the cache's lock for as long as it waits (here a
    /// set to a device that never answers): `detail` meanwhile shows the page read-only, and a daemon started
    /// meanwhile waits for it, saying so, and then starts.
    @Test(.timeLimit(.minutes(2)))
    func aDaemonStartedWhileACommandHoldsTheCacheWaitsForIt() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("mute1", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Mute","productId":"p-light-1"}"#, time: t0)
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("mute1") { $0["online"] == true }
            try await harness.stopDaemon()

            let command = try DaemonProcess(thingAgentExecutable(), [
                "set", "mute1", "switch_1=true", "--timeout", "12", "--broker", broker.url, "--db", harness.database,
            ], logPath: harness.directory + "/set.out")
            try await waitUntil(timeout: .seconds(20)) {
                (try? CacheLock(cache: harness.database, holder: .command("probe"))) == nil || !command.isRunning
            }
            #expect(command.isRunning, "\(command.log)")
            // detail, which cannot take the cache meanwhile, shows the page from the file, read-only.
            let detail = try await harness.cli(["detail", "mute1"])
            #expect(detail.status == 0, "\(detail.stderr)")
            #expect(detail.stdout.contains("Device mute1"), "\(detail.stdout)")
            #expect(detail.stderr.contains("in use by the command 'thing-agent set'")
                    && detail.stderr.contains("the page is read from the file"), "\(detail.stderr)")
            #expect(command.isRunning, "the set ended before the checks: \(command.log)")
            try await harness.startDaemon(timeout: .seconds(60))
            let daemon = try #require(harness.daemon)
            #expect(daemon.log.contains("a command holds the cache while no daemon runs: waiting for it"), "\(daemon.log)")
            #expect(await command.waitForExit(timeout: .seconds(30)) == 5, "\(command.log)")
            await device.disconnect()
            try await harness.stopDaemon()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func editsWhileTheDaemonRunsGoThroughItAndShowInItsAnswersAtOnce() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("lamp9", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Lamp","productId":"p-light-1"}"#, time: t0)
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("lamp9") { $0["online"] == true }

            let edit = try await harness.cli(["edit", "lamp9", "--name", "Reading lamp", "--room", "Study"])
            #expect(edit.status == 0, "\(edit.stderr)")
            // No waiting: the daemon applied the edit before the command printed it.
            let info = try await Self.ask(harness, "info", JSONObject([("device", "lamp9")]))
            #expect(info["code"] == 0)
            #expect(info["data"]?["name"] == "Reading lamp")
            #expect(info["data"]?["room"] == "Study")
            #expect(info["data"]?["reportedName"] == "Lamp")

            #expect(try await harness.cli(["group", "create", "study", "lamp9"]).status == 0)
            #expect(try await harness.cli(["network", "add", "lamp9", "Spare", "--priority", "2"]).status == 0)
            let groups = try await harness.cli(["group", "list", "--json"])
            #expect(try JSONParser.parse(groups.stdout)[0]?["devices"] == ["lamp9"])
            let missing = try await harness.cli(["network", "remove", "lamp9", "Nope"])
            #expect(missing.status == 1)
            #expect(missing.stderr.contains("lamp9 has no backup network 'Nope'"), "\(missing.stderr)")
            let taken = try await harness.cli(["group", "create", "study"])
            #expect(taken.status == 1)
            let bad = try await harness.cli(["edit", "lamp9", "--icon", "not a url"])
            #expect(bad.status == 2, "\(bad.stderr)")

            // A frozen daemon answers nothing: the command says so, and does not write the file behind its back.
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGSTOP)
            let frozen = try await harness.cli(["edit", "lamp9", "--name", "Later", "--timeout", "1"])
            daemon.signal(SIGCONT)
            #expect(frozen.status == 5, "\(frozen.stderr)")
            #expect(frozen.stderr.contains("did not answer"), "\(frozen.stderr)")
            // The request waited for the daemon on the broker: once it runs again, it applies it.
            let later = try await harness.waitForInfo("lamp9") { $0["name"] == "Later" }
            #expect(later["room"] == "Study")
            await device.disconnect()
        }
    }

    /// The CLI asks for its answer under the configured reply prefix, not the default one the daemon would refuse.
    @Test(.timeLimit(.minutes(2)))
    func theCLIsWritesUseTheConfiguredReplyPrefix() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let config = URL(fileURLWithPath: harness.database).deletingLastPathComponent()
                .appendingPathComponent("prefix.json").path
            try #"{"replyPrefix": "fleet/answers/"}"#.write(toFile: config, atomically: true, encoding: .utf8)
            try await harness.startDaemon(["--config", config])
            let device = try SimulatedDevice("lamp7", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Lamp","productId":"p-light-1"}"#, time: t0)
            _ = try await harness.waitForInfo("lamp7") { $0["name"] == "Lamp" }
            let edit = try await harness.cli(["edit", "lamp7", "--name", "Desk lamp", "--timeout", "10",
                                              "--config", config])
            #expect(edit.status == 0, "\(edit.stderr)")
            _ = try await harness.waitForInfo("lamp7") { $0["name"] == "Desk lamp" }
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func withoutADaemonTheCommandWritesTheFileItself() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("fan2", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Fan"}"#, time: t0)
            _ = try await harness.waitForInfo("fan2") { $0["name"] == "Fan" }
            await device.disconnect()
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            try await waitUntil(timeout: .seconds(20)) { !daemon.isRunning }

            let edit = try await harness.cli(["edit", "fan2", "--room", "Attic", "--json"])
            #expect(edit.status == 0, "\(edit.stderr)")
            #expect(try JSONParser.parse(edit.stdout)["room"] == "Attic")
            #expect(try await harness.info("fan2")?["room"] == "Attic")
            #expect(try await harness.cli(["group", "create", "top", "fan2"]).status == 0)
            // The daemon started again reads what the command wrote.
            try await harness.startDaemon()
            let info = try await Self.ask(harness, "info", JSONObject([("device", "fan2")]))
            #expect(info["data"]?["room"] == "Attic")
        }
    }
}
