import Foundation
import JSON
import Testing
import TestSupport

/// Running under systemd and by hand: notify socket, watchdog, SIGHUP, one daemon per cache file, journald.
@Suite("the daemon as a service: systemd, signals, lock, logs", .serialized)
struct DaemonOperationsTests {
    /// A device's report reaches the cache through the running daemon.
    static func expectServes(_ harness: AgentHarness, _ broker: MosquittoBroker, device id: String) async throws {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        try await device.status(true, time: t0)
        _ = try await harness.waitForInfo(id) { $0["online"] == true }
        await device.disconnect()
    }

    @Test(.timeLimit(.minutes(1)))
    func tellsSystemdWhenReadyWhatItDoesAndWhenItStopsAndFeedsTheWatchdog() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let socket = try NotifySocket(directory: harness.directory)
            defer { socket.close() }
            try await harness.startDaemon(environment: [
                "NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "1000000",
            ])
            let daemon = try #require(harness.daemon)
            try await waitUntil(timeout: .seconds(20)) { socket.lines.contains("READY=1") }
            // READY=1 comes once the broker acknowledged the subscriptions, which the log line follows.
            #expect(daemon.log.contains("connected and subscribed"))
            let ready = try #require(socket.datagrams.first { $0.contains("READY=1") })
            #expect(ready.contains("STATUS=0 devices; broker connected to \(broker.url)"), "\(ready)")
            let beforeReady = socket.lines.prefix { $0 != "READY=1" }
            #expect(beforeReady.contains { $0.hasPrefix("STATUS=loading the cache") }, "\(socket.lines)")

            // Half of WATCHDOG_USEC: a ping about every 0.5 s while the receive path and flusher go round.
            try await waitUntil(timeout: .seconds(20)) { socket.lines.filter { $0 == "WATCHDOG=1" }.count >= 3 }

            let device = try SimulatedDevice("sd1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            // STATUS= follows the fleet (refreshed every 5 s when it changed).
            try await waitUntil(timeout: .seconds(30)) {
                socket.lines.contains("STATUS=1 devices; broker connected to \(broker.url)")
            }
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            #expect(socket.lines.filter { $0 == "STOPPING=1" }.count == 1, "\(socket.lines)")
            await device.disconnect()
        }
    }

    /// A receive path that holds intake because the cache cannot be written is waiting on purpose, not stuck:
    /// systemd must not kill it (it resumes by itself once the file is writable).
    @Test(.timeLimit(.minutes(3)),
          .enabled(if: canMakeImmutable, "chattr +i does not work on this file system; skipped"))
    func theWatchdogIsFedWhileIntakeIsHeld() async throws {
        let sockets = try makeTemporaryDirectory("notify")
        defer { try? FileManager.default.removeItem(atPath: sockets) }
        let socket = try NotifySocket(directory: sockets)
        defer { socket.close() }
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let (harness, device, _) = try await StorageFaultTests.heldByAnImmutableCache(
                "dog0", broker, environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "1000000"])
            defer { clearImmutable(harness.database) }
            let daemon = try #require(harness.daemon)
            @Sendable func pings() -> Int { socket.lines.filter { $0 == "WATCHDOG=1" }.count }
            // A ping every 0.5 s; the liveness limit is 5 s. Twenty more pings span well past it.
            let held = pings()
            try await waitUntil(timeout: .seconds(90)) { pings() >= held + 20 || !daemon.isRunning }
            #expect(pings() >= held + 20, "the pings stopped during the hold: \(daemon.log.suffix(2000))")
            #expect(!daemon.log.contains("no longer fed"), "\(daemon.log.suffix(2000))")
            let text = try await harness.cli(["stats"])
            #expect(text.stdout.contains("Storage: holding"), "the pings came during the hold: \(text.stdout)")

            clearImmutable(harness.database)
            try await harness.waitForWholeStream("dog0", last: 100, timeout: .seconds(60))
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func withoutWatchdogUsecOrForAnotherPidItSendsNoWatchdogPings() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let socket = try NotifySocket(directory: harness.directory)
            defer { socket.close() }
            try await harness.startDaemon(environment: [
                "NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1",
            ])
            let daemon = try #require(harness.daemon)
            try await waitUntil(timeout: .seconds(20)) { socket.lines.contains("READY=1") }
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            try await waitUntil(timeout: .seconds(10)) { socket.lines.contains("STOPPING=1") }
            #expect(!socket.lines.contains("WATCHDOG=1"), "WATCHDOG_PID names another process: \(socket.lines)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aSecondDaemonOnTheSameCacheExitsAtOnceNamingTheFileAndTheHolder() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let first = try #require(harness.daemon)
            let second = try await runCommand(thingAgentExecutable(), [
                "run", "--broker", broker.url, "--db", harness.database, "--client-id", harness.clientID + "-2",
            ], timeout: .seconds(20))
            #expect(second.status == 1)
            #expect(second.stderr.contains(harness.database), "\(second.stderr)")
            #expect(second.stderr.contains("pid \(first.pid)"), "\(second.stderr)")
            #expect(!second.stderr.contains("connected"), "it must not reach the broker: \(second.stderr)")

            // The first goes on untouched.
            #expect(first.isRunning)
            try await Self.expectServes(harness, broker, device: "lk1")
            let attributes = try FileManager.default.attributesOfItem(atPath: harness.database + ".lock")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            first.signal(SIGTERM)
            #expect(await first.waitForExit(timeout: DaemonProcess.hangBound) == 0)

            // Once the holder is gone, the next daemon starts.
            try await harness.startDaemon()
            harness.daemon?.signal(SIGTERM)
            #expect(await harness.daemon?.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        }
    }

    /// The lock comes before the cache is opened: a second daemon migrates nothing under the first (here the file
    /// is made to look one schema version old, which any open of the cache would migrate).
    @Test(.timeLimit(.minutes(1)))
    func aSecondDaemonIsRefusedBeforeItOpensOrMigratesTheCache() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let first = try #require(harness.daemon)
            let latest = try #require(Int(try await sqlite3(harness.database, "PRAGMA user_version")))
            @Sendable func setVersion(_ version: Int) async throws {
                let result = try await runCommand("/usr/bin/sqlite3", [
                    "-bail", "-cmd", ".timeout 5000", harness.database, "PRAGMA user_version = \(version)"])
                try #require(result.status == 0, "\(result.stderr)")
            }
            try await setVersion(latest - 1)
            let second = try await runCommand(thingAgentExecutable(), [
                "run", "--broker", broker.url, "--db", harness.database, "--client-id", harness.clientID + "-2",
            ], timeout: .seconds(20))
            #expect(second.status == 1)
            #expect(second.stderr.contains("is in use by the daemon with pid \(first.pid)"), "\(second.stderr)")
            #expect(try await sqlite3(harness.database, "PRAGMA user_version") == "\(latest - 1)",
                    "the second daemon migrated the cache")
            try await setVersion(latest)
            first.signal(SIGTERM)
            #expect(await first.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func sighupReloadsLevelModelsScenesAndLayoutAndNeverEndsTheDaemon() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let models = harness.directory + "/models"
            try FileManager.default.copyItem(atPath: shippedModelsDirectory(), toPath: models)
            let scenes = harness.directory + "/scenes.json"
            try FileManager.default.copyItem(atPath: repositoryRoot() + "/Config/scenes.json", toPath: scenes)
            let config = harness.directory + "/agent.json"
            func writeConfig(level: String) throws {
                try """
                    {"modelsDirectory":"\(models)","scenesFile":"\(scenes)","logLevel":"\(level)"}
                    """.write(toFile: config, atomically: true, encoding: .utf8)
            }
            try writeConfig(level: "warning")
            // Readiness from the notify socket: at level warning the log says nothing until then.
            let socket = try NotifySocket(directory: harness.directory)
            defer { socket.close() }
            let daemon = try DaemonProcess(thingAgentExecutable(), ["run", "--config", config] + harness.commonArguments,
                                           environment: ["NOTIFY_SOCKET": socket.path],
                                           logPath: harness.directory + "/daemon.log")
            try await waitUntil(timeout: .seconds(20)) { socket.lines.contains("READY=1") || !daemon.isRunning }
            #expect(!daemon.log.contains("cache loaded"), "info lines are below warning")

            // One model more (the eighth) and the level lowered to info: both apply.
            let plug = try String(contentsOfFile: models + "/p-plug-1.json", encoding: .utf8)
            try plug.replacingOccurrences(of: "\"p-plug-1\"", with: "\"p-plug-2\"")
                .write(toFile: models + "/p-plug-2.json", atomically: true, encoding: .utf8)
            try writeConfig(level: "info")
            daemon.signal(SIGHUP)
            try await waitUntil(timeout: .seconds(10)) { daemon.log.contains("received SIGHUP; reloaded") }
            #expect(daemon.log.contains("thing models (8 products)"), "\(daemon.log)")
            #expect(daemon.log.contains("scenes (2 from \(scenes))"), "\(daemon.log)")
            #expect(daemon.log.contains("logLevel=info"))

            // A broken model keeps the previous models; the rest reloads; the daemon runs on.
            try "{\"productId\":".write(toFile: models + "/p-broken.json", atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            try await waitUntil(timeout: .seconds(10)) { daemon.log.contains("kept the previous thing models") }
            #expect(daemon.log.contains("p-broken.json"), "the message names the file: \(daemon.log)")

            // A config file that no longer parses: nothing reloaded, said so, still running.
            try "{ not json".write(toFile: config, atomically: true, encoding: .utf8)
            daemon.signal(SIGHUP)
            try await waitUntil(timeout: .seconds(10)) { daemon.log.contains("nothing reloaded") }
            #expect(daemon.isRunning)
            try await Self.expectServes(harness, broker, device: "hup1")
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func underJournaldEachLineCarriesItsSyslogPriority() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let log = harness.directory + "/stderr.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            var info = stat()
            #expect(stat(log, &info) == 0)
            // As systemd sets it: the device and inode of the stream stderr is connected to (here a file the shell
            // appends stderr to, so it stays the same file).
            let stream = "\(info.st_dev):\(info.st_ino)"
            let offline = "mqtt://127.0.0.1:\(try freeLoopbackPort())"
            let daemon = try DaemonProcess("/bin/sh", [
                "-c", "exec \"$0\" run --broker \(offline) --db \(harness.database) 2>>\(log)", thingAgentExecutable(),
            ], environment: ["JOURNAL_STREAM": stream], logPath: harness.directory + "/stdout.log")
            let written: @Sendable () -> String = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
            try await waitUntil(timeout: .seconds(10)) { written().contains("broker not reachable") }
            let lines = written().split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.hasPrefix("<6>") && $0.contains("cache loaded") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("<4>") && $0.contains("broker not reachable") }, "\(lines)")
            #expect(lines.allSatisfy { $0.hasPrefix("<") }, "\(lines)")
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)

            // A JOURNAL_STREAM inherited from elsewhere (stderr is another file): plain lines.
            let other = try AgentHarness(broker: broker)
            try await other.startDaemon(environment: ["JOURNAL_STREAM": stream], offline: true)
            let plain = try #require(other.daemon)
            #expect(!plain.log.hasPrefix("<"), "\(plain.log)")
            plain.signal(SIGTERM)
            _ = await plain.waitForExit(timeout: .seconds(10))
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func jsonLogLinesWriteNumbersAsNumbersAndTimesWithAZone() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon(["--log-format", "json"])
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            let lines = try daemon.log.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
            let loaded = try #require(lines.first { $0["message"] == "cache loaded" })
            #expect(loaded["devices"] == .integer(0), "\(loaded.serialized())")
            #expect(loaded["db"] == .string(harness.database))
            for line in lines {
                let time = try #require(line["time"]?.stringValue)
                let parsed = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(time)
                #expect(parsed > Date(timeIntervalSince1970: 1_700_000_000), "\(time)")
                #expect(time.hasSuffix("Z") || time.range(of: #"[+-]\d\d:\d\d$"#, options: .regularExpression) != nil,
                        "RFC 3339 needs a zone: \(time)")
            }
        }
    }
}
