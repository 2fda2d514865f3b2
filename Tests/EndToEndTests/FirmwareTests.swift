import Foundation
import JSON
import Testing
import TestSupport
import ThingAgent

/// `firmware` and `ota` through the real executable, next to the real daemon, with the simulator or scripted
/// devices on a real broker.
@Suite("thing-agent firmware and ota", .serialized)
struct FirmwareTests {
    static let hash = String(repeating: "5e", count: 32)

    /// A catalog with p-light-1 (the simulator's plain devices) at 9.0.0.
    static func catalog(in directory: String) throws -> String {
        let path = directory + "/firmware.json"
        try Data(#"{"p-light-1":{"version":"9.0.0","url":"https://fw.example/l-9.bin","sha256":"\#(hash)","size":4096}}"#
            .utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func simulate(_ broker: MosquittoBroker, devices: Int = 2, seed: Int, _ extra: [String],
                         log: String) throws -> DaemonProcess {
        try DaemonProcess(thingAgentExecutable(), [
            "simulate", "--broker", broker.url, "--devices", "\(devices)", "--gateways", "0", "--seed", "\(seed)",
            "--ota-step", "0.1", "--report-interval", "0", "--signal-interval", "0"] + extra, logPath: log)
    }

    /// The ids of the simulated devices, once the daemon cached them online.
    static func simulatedDevices(_ harness: AgentHarness, count: Int, seed: Int) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let listed = try await harness.cli(["devices", "--json"])
            let devices = (try? JSONParser.parse(listed.stdout).arrayValue) ?? []
            let ids = devices.compactMap { device -> String? in
                guard device["online"]?.boolValue == true, let id = device["devId"]?.stringValue, id.hasPrefix("dev-")
                else { return nil }
                return id
            }
            if ids.count == count { return ids.sorted() }
            if ContinuousClock.now > deadline { throw TestSupportError("the simulated devices did not come online") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func inventoryAndOneUpgradeEndOnTheReportedVersion() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let catalog = try Self.catalog(in: harness.directory)
            try await harness.startDaemon(["--config", try Self.config(harness, catalog: catalog)])
            let simulator = try Self.simulate(broker, seed: 21, [], log: harness.directory + "/simulate.log")
            let devices = try await Self.simulatedDevices(harness, count: 2, seed: 21)

            let inventory = try await harness.cli(["firmware", "--catalog", catalog, "--outdated", "--json"])
            #expect(inventory.status == 0, "\(inventory.stderr)")
            let outdated = try JSONParser.parse(inventory.stdout)["outdated"]?.arrayValue ?? []
            #expect(outdated.compactMap { $0["devId"]?.stringValue }.sorted() == devices)

            let upgrade = try await harness.cli(["ota", devices[0], "--latest", "--catalog", catalog], timeout: .seconds(90))
            #expect(upgrade.status == 0, "\(upgrade.stdout) \(upgrade.stderr)")
            for stage in ["downloading", "verifying", "flashing", "rebooting", "succeeded"] {
                #expect(upgrade.stdout.contains(stage), "\(upgrade.stdout)")
            }
            let info = try #require(try await harness.info(devices[0]))
            #expect(info["firmwareVersion"]?.stringValue == "9.0.0")
            #expect(info["upgrade"]?["stage"]?.stringValue == "succeeded")

            // At the catalog's version: nothing sent, exit 0.
            let again = try await harness.cli(["ota", devices[0], "--latest", "--catalog", catalog])
            #expect(again.status == 0 && again.stdout.contains("nothing sent"), "\(again.stdout) \(again.stderr)")
            // Not newer than what runs: the device refuses (1007), exit 4.
            let older = try await harness.cli(["ota", devices[1], "--version", "0.1.0", "--url", "https://fw.example/o",
                                               "--sha256", Self.hash])
            #expect(older.status == 4 && older.stderr.contains("1007"), "\(older.stderr)")
            // The upgraded device is no longer behind.
            let inventoryAfter = try await harness.cli(["firmware", "--catalog", catalog, "--json"])
            let rows = try JSONParser.parse(inventoryAfter.stdout)["products"]?.arrayValue ?? []
            #expect(rows.contains { $0["version"]?.stringValue == "9.0.0" && $0["outdated"]?.boolValue == false })
            simulator.signal(SIGTERM)
            _ = await simulator.waitForExit(timeout: .seconds(10))
        }
    }

    /// A config file naming the catalog (what the daemon's SIGHUP reload and the detail page read).
    static func config(_ harness: AgentHarness, catalog: String, stall: Double = 300) throws -> String {
        let path = harness.directory + "/agent.json"
        try Data(#"{"firmwareCatalog":"\#(catalog)","otaStallTimeout":\#(stall)}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(.timeLimit(.minutes(4)), arguments: ["download", "verify", "flash", "rollback"])
    func eachFailureStageEndsTheUpgradeWithItsFailedCode(stage: String) async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let catalog = try Self.catalog(in: harness.directory)
            try await harness.startDaemon()
            let simulator = try Self.simulate(broker, seed: 31, ["--ota-failure-rate", "1", "--ota-fail-at", stage],
                                              log: harness.directory + "/simulate.log")
            let devices = try await Self.simulatedDevices(harness, count: 2, seed: 31)
            let before = try #require(try await harness.info(devices[0]))["firmwareVersion"]?.stringValue
            let upgrade = try await harness.cli(["ota", devices[0], "--latest", "--catalog", catalog], timeout: .seconds(90))
            #expect(upgrade.status == 1, "\(upgrade.stdout) \(upgrade.stderr)")
            #expect(upgrade.stderr.contains("failedCode \(stage)"), "\(upgrade.stderr)")
            let info = try await harness.waitForInfo(devices[0]) { $0["upgrade"]?["stage"]?.stringValue == "failed" }
            #expect(info["upgrade"]?["failedCode"]?.stringValue == stage)
            #expect(info["firmwareVersion"]?.stringValue == before)
            simulator.signal(SIGTERM)
            _ = await simulator.waitForExit(timeout: .seconds(10))
        }
    }

    /// A daemon, a scripted device `id` at 1.0.0 (its info retained, at t0) that accepts `ota/start`, and
    /// `ota id --version 2.0.0` running until the upgrade is accepted.
    static func startScriptedUpgrade(_ harness: AgentHarness, device id: String) async throws
        -> (device: SimulatedDevice, answering: Task<Void, Never>, running: Task<ProcessResult, any Error>) {
        try await harness.startDaemon()
        let device = try SimulatedDevice(id, brokerURL: harness.broker.url)
        try await device.connect()
        try await device.info(#"{"productId":"p-light-1","firmwareVersion":"1.0.0"}"#, time: t0)
        try await device.status(true, time: t0)
        let answering = try await device.answer("ota/start") { _ in #""code":0"# }
        _ = try await harness.waitForInfo(id) { $0["firmwareVersion"]?.stringValue == "1.0.0" }
        let arguments = ["ota", id, "--version", "2.0.0", "--url", "https://fw.example/2", "--sha256", hash]
        let running = Task { try await harness.cli(arguments, timeout: .seconds(120)) }
        _ = try await harness.waitForInfo(id) { $0["upgrade"]?["stage"]?.stringValue == "accepted" }
        return (device, answering, running)
    }

    @Test(.timeLimit(.minutes(3)))
    func anUpgradeSurvivesADaemonRestartAndEndsOnlyOnTheReportedVersion() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let (device, answering, running) = try await Self.startScriptedUpgrade(harness, device: "ota1")
            func progress(_ state: String, _ percent: Int) async throws {
                try await device.publish("ota/progress", """
                    {"time":\(Timestamp.current),"data":{"version":"2.0.0","state":"\(state)","progress":\(percent)}}
                    """)
            }
            try await progress("downloading", 30)
            _ = try await harness.waitForInfo("ota1") { $0["upgrade"]?["progress"]?.int64Value == 30 }

            // The daemon dies mid-upgrade; the row is in the file and the next daemon goes on from it.
            harness.daemon?.signal(SIGKILL)
            _ = await harness.daemon?.waitForExit(timeout: .seconds(10))
            try await harness.startDaemon()
            try await progress("rebooting", 100)
            _ = try await harness.waitForInfo("ota1") { $0["upgrade"]?["stage"]?.stringValue == "rebooting" }
            // A report without firmwareVersion ends nothing.
            try await device.info(#"{"name":"Hall"}"#, time: Timestamp.current)
            _ = try await harness.waitForInfo("ota1") { $0["name"]?.stringValue == "Hall" }
            #expect(try await harness.info("ota1")?["upgrade"]?["stage"]?.stringValue == "rebooting")

            try await device.info(#"{"firmwareVersion":"2.0.0"}"#, time: Timestamp.current)
            let result = try await running.value
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("succeeded"))
            let info = try #require(try await harness.info("ota1"))
            #expect(info["upgrade"]?["stage"]?.stringValue == "succeeded")
            answering.cancel()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aRestartWhileRebootingDoesNotEndTheUpgradeOnTheRetainedOldInfo() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let (device, answering, running) = try await Self.startScriptedUpgrade(harness, device: "ota2")
            let rebootTime = Timestamp.current
            try await device.publish("ota/progress", """
                {"time":\(rebootTime),"data":{"version":"2.0.0","state":"rebooting","progress":100}}
                """)
            _ = try await harness.waitForInfo("ota2") { $0["upgrade"]?["stage"]?.stringValue == "rebooting" }

            harness.daemon?.signal(SIGKILL)
            _ = await harness.daemon?.waitForExit(timeout: .seconds(10))
            try await harness.startDaemon()
            // Not retained, so the old info stays on the broker; it follows the replay on the same topic, so once
            // its name is cached the replay was handled. Its old version at the reboot report's own time is no
            // newer than that report: it ends nothing either.
            try await device.publish("info", """
                {"time":\(rebootTime),"data":{"firmwareVersion":"1.0.0","name":"Hall"}}
                """)
            _ = try await harness.waitForInfo("ota2") { $0["name"]?.stringValue == "Hall" }
            let afterRestart = try #require(try await harness.info("ota2"))
            #expect(afterRestart["upgrade"]?["stage"]?.stringValue == "rebooting", "\(afterRestart)")
            #expect(afterRestart["upgrade"]?["failedCode"]?.stringValue == "", "\(afterRestart)")

            try await device.info(#"{"firmwareVersion":"2.0.0"}"#, time: rebootTime + 1)
            let result = try await running.value
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("succeeded"), "\(result.stdout)")
            let info = try #require(try await harness.info("ota2"))
            #expect(info["upgrade"]?["stage"]?.stringValue == "succeeded")
            #expect(info["firmwareVersion"]?.stringValue == "2.0.0")
            answering.cancel()
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aStalledUpgradeEndsAsTimeoutAndARefusalExitsFour() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon([], environment: ["THING_AGENT_OTA_STALL_TIMEOUT": "2"])
            let quiet = try SimulatedDevice("ota2", brokerURL: broker.url)
            try await quiet.connect()
            try await quiet.info(#"{"productId":"p-light-1","firmwareVersion":"1.0.0"}"#, time: t0)
            try await quiet.status(true, time: t0)
            let accepts = try await quiet.answer("ota/start") { _ in #""code":0"# }
            let busy = try SimulatedDevice("ota3", brokerURL: broker.url)
            try await busy.connect()
            try await busy.info(#"{"productId":"p-light-1","firmwareVersion":"1.0.0"}"#, time: t0)
            try await busy.status(true, time: t0)
            let refuses = try await busy.answer("ota/start") { _ in #""code":1006,"message":"busy""# }
            _ = try await harness.waitForInfo("ota3") { $0["firmwareVersion"]?.stringValue == "1.0.0" }
            _ = try await harness.waitForInfo("ota2") { $0["firmwareVersion"]?.stringValue == "1.0.0" }
            let image = ["--version", "2.0.0", "--url", "https://fw.example/2", "--sha256", Self.hash]

            let stalled = try await harness.cli(["ota", "ota2"] + image, timeout: .seconds(60))
            #expect(stalled.status == 5, "\(stalled.stdout) \(stalled.stderr)")
            #expect(stalled.stderr.contains("failedCode timeout"))
            let info = try #require(try await harness.info("ota2"))
            #expect(info["upgrade"]?["failedCode"]?.stringValue == "timeout")

            let refused = try await harness.cli(["ota", "ota3"] + image)
            #expect(refused.status == 4 && refused.stderr.contains("1006"), "\(refused.stderr)")
            #expect(try await harness.info("ota3")?["upgrade"] == nil)

            try await busy.status(false, time: Timestamp.current)
            _ = try await harness.waitForInfo("ota3") { $0["online"]?.boolValue == false }
            let offline = try await harness.cli(["ota", "ota3"] + image)
            #expect(offline.status == 7, "\(offline.stderr)")
            accepts.cancel()
            refuses.cancel()
        }
    }
}

/// Staged rollouts: `ota --product P --latest`.
@Suite("thing-agent ota rollouts", .serialized)
struct FirmwareRolloutTests {
    /// The most upgrades of `devices` that ran at once, from the start and end times the daemon recorded.
    static func mostAtOnce(_ harness: AgentHarness, _ devices: [String]) async throws -> Int {
        var spans: [(Int64, Int64)] = []
        for id in devices {
            guard let upgrade = try await harness.info(id)?["upgrade"], let start = upgrade["startedAt"]?.int64Value,
                  let end = upgrade["endedAt"]?.int64Value else { continue }
            spans.append((start, end))
        }
        return spans.map { span in spans.filter { $0.0 <= span.0 && span.0 < $0.1 }.count }.max() ?? 0
    }

    @Test(.timeLimit(.minutes(3)))
    func aRolloutUpgradesTheOutdatedDevicesAtMostNAtOnceAndListsTheOfflineOnes() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let catalog = try FirmwareTests.catalog(in: harness.directory)
            try await harness.startDaemon()
            let simulator = try FirmwareTests.simulate(broker, devices: 3, seed: 41, [],
                                                       log: harness.directory + "/simulate.log")
            let devices = try await FirmwareTests.simulatedDevices(harness, count: 3, seed: 41)
            let away = try SimulatedDevice("dev-away", brokerURL: broker.url)
            try await away.connect()
            try await away.info(#"{"productId":"p-light-1","firmwareVersion":"1.0.0"}"#, time: t0)
            try await away.status(false, time: t0)
            _ = try await harness.waitForInfo("dev-away") { $0["online"]?.boolValue == false }

            let rollout = try await harness.cli(["ota", "--product", "p-light-1", "--latest", "--catalog", catalog,
                                                 "--concurrency", "2", "--json"], timeout: .seconds(120))
            #expect(rollout.status == 0, "\(rollout.stdout) \(rollout.stderr)")
            let outcomes = try JSONParser.parse(rollout.stdout).arrayValue ?? []
            func result(_ id: String) -> String? {
                outcomes.first { $0["devId"]?.stringValue == id }?["result"]?.stringValue
            }
            for id in devices { #expect(result(id) == "succeeded", "\(rollout.stdout)") }
            #expect(result("dev-away") == "skipped")
            #expect(try await Self.mostAtOnce(harness, devices) <= 2)
            simulator.signal(SIGTERM)
            _ = await simulator.waitForExit(timeout: .seconds(10))
        }
    }

    /// A start the daemon does not answer is an outcome of the rollout, not the end of the command: the table is
    /// still printed, and it counts as a failure.
    @Test(.timeLimit(.minutes(3)))
    func aStartTheDaemonDoesNotAnswerIsListedAndTheRolloutEndsWithItsTable() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let catalog = try FirmwareTests.catalog(in: harness.directory)
            let config = harness.directory + "/patience.json"
            try #"{"requestTimeout": 1}"#.write(toFile: config, atomically: true, encoding: .utf8)
            try await harness.startDaemon()
            var devices: [SimulatedDevice] = []
            for id in ["dev-q1", "dev-q2"] {
                let device = try SimulatedDevice(id, brokerURL: broker.url)
                try await device.connect()
                try await device.info(#"{"productId":"p-light-1","firmwareVersion":"1.0.0"}"#, time: t0)
                try await device.status(true, time: t0)
                _ = try await harness.waitForInfo(id) { $0["online"]?.boolValue == true }
                devices.append(device)
            }
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGSTOP)
            let rollout = try await harness.cli(["ota", "--product", "p-light-1", "--latest", "--catalog", catalog,
                                                 "--config", config, "--json"], timeout: .seconds(60))
            daemon.signal(SIGCONT)
            #expect(rollout.status == 1, "\(rollout.stdout) \(rollout.stderr)")
            let outcomes = try JSONParser.parse(rollout.stdout).arrayValue ?? []
            let results = outcomes.compactMap { $0["result"]?.stringValue }.sorted()
            #expect(results == ["not started", "timeout"], "\(rollout.stdout) \(rollout.stderr)")
            for device in devices { await device.disconnect() }
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aRolloutStopsStartingUpgradesAfterKFailuresAndExitsOne() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let catalog = try FirmwareTests.catalog(in: harness.directory)
            try await harness.startDaemon()
            let simulator = try FirmwareTests.simulate(broker, devices: 5, seed: 43,
                                                       ["--ota-failure-rate", "1", "--ota-fail-at", "flash"],
                                                       log: harness.directory + "/simulate.log")
            let devices = try await FirmwareTests.simulatedDevices(harness, count: 5, seed: 43)

            let rollout = try await harness.cli(["ota", "--product", "p-light-1", "--latest", "--catalog", catalog,
                                                 "--concurrency", "2", "--max-failures", "2"], timeout: .seconds(120))
            #expect(rollout.status == 1, "\(rollout.stdout) \(rollout.stderr)")
            let lines = rollout.stdout.split(separator: "\n")
            let table = lines.filter { line in devices.contains { line.hasPrefix($0 + " ") } && line.contains("9.0.0") }
            // Two start at once; each failure frees a slot until the second one, so K to K + N - 1 (2 or 3) start,
            // all fail, and the rest never start.
            let failed = table.filter { $0.contains("failedCode flash") }.count
            #expect((2...3).contains(failed), "\(rollout.stdout)")
            #expect(table.filter { $0.contains("not started") }.count == 5 - failed, "\(rollout.stdout)")
            #expect(table.filter { $0.contains("succeeded") }.isEmpty)
            // Upgrades that ran were followed to their end; the rest never got ota/start.
            var started = 0
            for id in devices {
                let upgrade = try await harness.info(id)?["upgrade"]
                if let upgrade {
                    started += 1
                    #expect(upgrade["stage"]?.stringValue == "failed")
                }
            }
            #expect(started == failed, "\(rollout.stdout)")
            #expect(try await Self.mostAtOnce(harness, devices) <= 2)
            simulator.signal(SIGTERM)
            _ = await simulator.waitForExit(timeout: .seconds(10))
        }
    }
}
