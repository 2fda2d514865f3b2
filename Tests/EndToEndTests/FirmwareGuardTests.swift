import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
import ThingAgent

/// What `ota` and the API's `ota` refuse or notice: a daemon gone while an upgrade is followed, over-long image
/// fields, and a second start while one is in progress.
@Suite("thing-agent ota: a daemon gone, bounds, one upgrade at a time", .serialized)
struct FirmwareGuardTests {
    /// The daemon, and a device it knows online that accepts every `ota/start`, counting them.
    static func daemonAndDevice(_ harness: AgentHarness, _ id: String)
        async throws -> (device: SimulatedDevice, sent: AnswerCount, answering: Task<Void, Never>) {
        try await harness.startDaemon()
        let device = try SimulatedDevice(id, brokerURL: harness.broker.url)
        try await device.connect()
        try await device.status(true, time: t0)
        let sent = AnswerCount()
        let answering = try await device.answer("ota/start") { _ in
            sent.increment()
            return #""code":0"#
        }
        _ = try await harness.waitForInfo(id) { $0["online"] == true }
        return (device, sent, answering)
    }

    @Test(.timeLimit(.minutes(3)))
    func otaWithoutATimeoutEndsWhenTheDaemonStops() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let (device, _, answering) = try await Self.daemonAndDevice(harness, "gone1")
            // `ota gone1 --version 2.0.0` with no --timeout, following an upgrade the device accepted and then
            // never reports on; the daemon stops once the command follows it (it printed the upgrade's line).
            let ota = try DaemonProcess(thingAgentExecutable(), [
                "ota", "gone1", "--version", "2.0.0", "--url", "https://fw.example/2", "--sha256", FirmwareTests.hash,
                "--broker", broker.url, "--db", harness.database,
            ], logPath: harness.directory + "/ota.log")
            try await waitUntil(timeout: .seconds(30)) { ota.log.contains("→ 2.0.0") || !ota.isRunning }
            try await harness.stopDaemon()
            // The daemon's grace (15 s) and the hang bound.
            let status = await ota.waitForExit(timeout: .seconds(15) + DaemonProcess.hangBound)
            #expect(status == 1, "\(ota.log)")
            #expect(ota.log.contains("the daemon stopped"), "\(ota.log)")
            #expect(ota.log.contains("thing-agent info gone1"), "\(ota.log)")
            // The upgrade stays recorded for the next daemon to follow.
            #expect(try await sqlite3(harness.database, "SELECT stage FROM ota_upgrades WHERE dev_id = 'gone1'")
                    == "accepted")
            answering.cancel()
            await device.disconnect()
        }
    }

    /// A daemon stopped while `ota/start` waits for its answer leaves the upgrade recorded, as a timeout does: the
    /// request may have reached the device, and the next daemon follows (or, silent, stalls) it.
    @Test(.timeLimit(.minutes(2)))
    func aStopWhileTheStartWaitsForItsAnswerKeepsTheUpgrade() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("slow1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            let silent = try await device.answer("ota/start") { _ in nil }
            _ = try await harness.waitForInfo("slow1") { $0["online"] == true }
            let ota = try DaemonProcess(thingAgentExecutable(), [
                "ota", "slow1", "--version", "2.0.0", "--url", "https://fw.example/2", "--sha256", FirmwareTests.hash,
                "--broker", broker.url, "--db", harness.database,
            ], logPath: harness.directory + "/ota.log")
            let row = "SELECT version || ' ' || stage FROM ota_upgrades WHERE dev_id = 'slow1'"
            try await waitUntil(timeout: .seconds(30)) { (try? await sqlite3(harness.database, row)) == "2.0.0 accepted" }
            try await harness.stopDaemon()
            #expect(try await sqlite3(harness.database, row) == "2.0.0 accepted")
            try await harness.startDaemon()
            #expect(try await harness.info("slow1")?["upgrade"]?["stage"]?.stringValue == "accepted")
            ota.signal(SIGKILL)
            silent.cancel()
            await device.disconnect()
        }
    }

    /// A device that never answers the upgrade's start: the daemon answers after its request timeout, and the
    /// command waits for that answer (with some slack) and names the device, instead of giving up at the same
    /// moment and blaming the daemon.
    @Test(.timeLimit(.minutes(2)))
    func anUpgradeASilentDeviceNeverAcceptsNamesTheDeviceNotTheDaemon() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_REQUEST_TIMEOUT": "2"])
            try await harness.startDaemon()
            let device = try SimulatedDevice("mute1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            let silent = try await device.answer("ota/start") { _ in nil }
            _ = try await harness.waitForInfo("mute1") { $0["online"] == true }
            let ota = try await runCommand(thingAgentExecutable(), [
                "ota", "mute1", "--version", "2.0.0", "--url", "https://fw.example/2", "--sha256", FirmwareTests.hash,
                "--broker", broker.url, "--db", harness.database,
            ], environment: ["THING_AGENT_REQUEST_TIMEOUT": "2"])
            #expect(ota.status == 5, "\(ota.stdout) \(ota.stderr)")
            #expect(ota.stderr.contains("mute1"), "\(ota.stderr)")
            #expect(!ota.stderr.contains("did not answer"), "the daemon did answer: \(ota.stderr)")
            silent.cancel()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func overLongURLsAndVersionsAreRefusedAndNothingIsSent() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let (device, sent, answering) = try await Self.daemonAndDevice(harness, "long1")
            let longURL = "https://fw.example/" + String(repeating: "a", count: InputBounds.maxFirmwareURLBytes)
            let longVersion = "1.0.0-" + String(repeating: "b", count: InputBounds.maxFirmwareVersionBytes)
            for (url, version, named) in [(longURL, "2.0.0", "'url'"), ("https://fw.example/2", longVersion, "'version'")] {
                let answer = try await OneWriterTests.ask(harness, "ota", JSONObject([
                    ("device", "long1"), ("version", .string(version)), ("url", .string(url)),
                    ("sha256", .string(FirmwareTests.hash)),
                ]))
                #expect(answer["code"] == 400, "\(answer)")
                #expect(answer["message"]?.stringValue?.contains(named) == true, "\(answer)")
                #expect(answer["message"]?.stringValue?.contains("at most") == true, "\(answer)")
            }
            // The command refuses them before it asks the daemon.
            let cli = try await harness.cli(["ota", "long1", "--version", "2.0.0", "--url", longURL,
                                             "--sha256", FirmwareTests.hash])
            #expect(cli.status == 2 && cli.stderr.contains("--url"), "\(cli.stderr)")
            let cliVersion = try await harness.cli(["ota", "long1", "--version", longVersion, "--url", "https://fw.example/2",
                                                    "--sha256", FirmwareTests.hash])
            #expect(cliVersion.status == 2 && cliVersion.stderr.contains("--version"), "\(cliVersion.stderr)")
            #expect(try await sqlite3(harness.database, "SELECT count(*) FROM ota_upgrades") == "0")
            #expect(sent.value == 0)
            answering.cancel()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aSecondStartWhileOneIsInProgressIsRefused() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let (device, sent, answering) = try await Self.daemonAndDevice(harness, "busy1")
            @Sendable func start(_ version: String) async throws -> JSONValue {
                try await OneWriterTests.ask(harness, "ota", JSONObject([
                    ("device", "busy1"), ("version", .string(version)), ("url", .string("https://fw.example/\(version)")),
                    ("sha256", .string(FirmwareTests.hash)),
                ]))
            }
            // Two starts at once: one is recorded and sent, the other refused.
            async let first = start("2.0.0")
            async let second = start("3.0.0")
            let answers = try await [first, second]
            let codes = answers.compactMap { $0["code"]?.int64Value }.sorted()
            #expect(codes == [0, 409], "\(answers)")
            let refusal = try #require(answers.first { $0["code"] == 409 })
            #expect(refusal["message"]?.stringValue?.contains("already in progress") == true, "\(refusal)")
            #expect(refusal["error"] == nil, "an upgrade in progress is not an offline device: \(refusal)")
            let accepted = try #require(answers.first { $0["code"] == 0 })
            let version = try #require(accepted["data"]?["version"]?.stringValue)
            #expect(sent.value == 1)
            #expect(try await sqlite3(harness.database, "SELECT version || ' ' || stage FROM ota_upgrades")
                    == "\(version) accepted")

            // The command says so, and exits as a busy device's refusal does.
            let again = try await harness.cli(["ota", "busy1", "--version", "4.0.0", "--url", "https://fw.example/4",
                                               "--sha256", FirmwareTests.hash])
            #expect(again.status == 4, "\(again.stdout) \(again.stderr)")
            #expect(again.stderr.contains("already in progress"), "\(again.stderr)")
            #expect(try await harness.info("busy1")?["upgrade"]?["version"]?.stringValue == version)

            // Once it has ended, the next one starts.
            try await device.publish("ota/progress", """
                {"time":\(Timestamp.current),"data":{"version":"\(version)","state":"failed","progress":0,"failedCode":"flash"}}
                """)
            _ = try await harness.waitForInfo("busy1") { $0["upgrade"]?["stage"]?.stringValue == "failed" }
            #expect(try await start("4.0.0")["code"] == 0)
            #expect(sent.value == 2)
            answering.cancel()
            await device.disconnect()
        }
    }
}

/// How many requests a device answered, counted in its answering task.
final class AnswerCount: Sendable {
    private let count = Mutex<Int>(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}
