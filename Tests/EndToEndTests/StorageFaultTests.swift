import Foundation
import JSON
import Testing
import TestSupport

/// Files failing under the running daemon: a full disk, a journal truncated by someone else, a cache file deleted,
/// replaced or made immutable. The real daemon, a real mosquitto, a real full file system (a small tmpfs); the
/// cache read back with the `sqlite3` shell. docs/faults.md says what each test proves.
@Suite("Faults: full disks and lost files", .serialized)
struct StorageFaultTests {
    static func publish(_ publisher: StreamPublisher, count: Int) async throws {
        for _ in 0..<count { try await publisher.publishNext() }
    }

    /// A connected device whose stream has its first `count` reports published (and acknowledged by the broker).
    static func stream(_ id: String, _ broker: MosquittoBroker, count: Int) async throws
        -> (device: SimulatedDevice, publisher: StreamPublisher) {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        let publisher = StreamPublisher(device: device)
        try await publish(publisher, count: count)
        return (device, publisher)
    }

    @Test(.timeLimit(.minutes(3)),
          .enabled(if: SmallDisk.isAvailable, "mounting a tmpfs needs root and a system that allows it; skipped"))
    func aFullDiskHoldsNewMessagesAtTheBrokerAndLosesNothing() async throws {
        let disk = try SmallDisk(megabytes: 8)
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let harness = try AgentHarness(broker: broker, database: disk.path + "/cache.sqlite",
                                           daemonEnvironment: streamDaemonSettings)
            // A small journal (256 KiB reserved) fills after a few thousand reports, so the test reaches the point
            // where the journal must grow and the disk has no room.
            try await harness.startDaemon(environment: ["THING_AGENT_JOURNAL_SIZE": "262144"])
            let (device, publisher) = try await Self.stream("full0", broker, count: 50)
            try await harness.waitForWholeStream("full0", last: 50)

            let filler = try disk.fill()
            // Acknowledged by the broker, which keeps them for the agent's session while it holds them.
            try await Self.publish(publisher, count: 4000)
            let daemon = try #require(harness.daemon)
            try await waitUntil(timeout: .seconds(60)) {
                daemon.log.contains("storage failing: cannot grow the journal") || !daemon.isRunning
            }
            try #require(daemon.isRunning, "the daemon died on the full disk: \(daemon.log.suffix(2000))")
            let held = try await harness.waitForStorage("holding", naming: harness.journal)
            let problems = held["problems"]?.arrayValue ?? []
            #expect(problems.contains { $0["error"]?.stringValue?.contains("No space left on device") == true },
                    "\(problems)")
            #expect(daemon.log.contains("storage failing"), "no error logged")
            #expect(daemon.log.contains(harness.journal), "the error does not name the journal")

            try FileManager.default.removeItem(atPath: filler)
            try await harness.waitForWholeStream("full0", last: 4050, timeout: .seconds(90))
            try await harness.waitForStorage("ok")
            #expect(daemon.log.contains("storage works again"))
            try await harness.stopCleanly()
            try await harness.expectWholeStream("full0", last: 4050)
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)),
          .enabled(if: SmallDisk.isAvailable, "mounting a tmpfs needs root and a system that allows it; skipped"))
    func aRestartOnAFullDiskFailsWithAnErrorNamingTheFile() async throws {
        let disk = try SmallDisk(megabytes: 24)
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, database: disk.path + "/cache.sqlite",
                                           daemonEnvironment: streamDaemonSettings)
            try await harness.startDaemon()
            let device = try SimulatedDevice("restart0", brokerURL: broker.url)
            try await device.connect()
            try await device.properties(#"{"switch_1":true}"#, time: t0 + 1)
            try await waitUntil(timeout: .seconds(15)) {
                (try? await sqlite3(harness.database, "SELECT count(*) FROM properties")) == "1"
            }
            try await harness.stopCleanly()
            _ = try disk.fill()
            let result = try await runCommand(thingAgentExecutable(), ["run"] + harness.commonArguments,
                                              timeout: .seconds(30))
            #expect(result.status == 1)
            #expect(result.stderr.contains(harness.database), "\(result.stderr)")
            #expect(result.stderr.contains("full") || result.stderr.contains("No space"), "\(result.stderr)")
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)), arguments: ["truncated", "deleted", "replaced"])
    func aJournalTruncatedOrLostUnderTheDaemonIsRepairedAndLosesNothing(how: String) async throws {
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            // Batches gather for 3 s: the reports are in the journal only when it is cut.
            try await harness.startDaemon(environment: ["THING_AGENT_FLUSH_INTERVAL": "3"])
            let (device, publisher) = try await Self.stream("trunc0", broker, count: 200)
            try await waitUntil(timeout: .seconds(30)) {
                ((try? JournalFile(path: harness.journal))?.records.count ?? 0) >= 200
            }
            switch how {
            case "truncated": #expect(truncate(harness.journal, 0) == 0)
            case "deleted": #expect(unlink(harness.journal) == 0)
            default:
                let other = harness.directory + "/other"
                try "not a journal".write(toFile: other, atomically: true, encoding: .utf8)
                #expect(rename(other, harness.journal) == 0)
            }
            try await Self.publish(publisher, count: 200)
            try await harness.waitForWholeStream("trunc0", last: 400, timeout: .seconds(60))
            let daemon = try #require(harness.daemon)
            #expect(daemon.isRunning)
            #expect(daemon.log.contains("the file was \(how)"), "not noticed: \(daemon.log.suffix(2000))")
            if how == "replaced" {
                let names = try FileManager.default.contentsOfDirectory(atPath: harness.directory)
                #expect(names.contains { $0.hasPrefix("cache.sqlite.journal.replaced-") }, "\(names)")
            }
            try await harness.waitForStorage("ok")

            // The repaired journal keeps what comes next: a kill right after a burst loses nothing.
            try await Self.publish(publisher, count: 100)
            try await waitUntil(timeout: .seconds(30)) {
                ((try? JournalFile(path: harness.journal))?.records.count ?? 0) >= 100
            }
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(timeout: .seconds(10))
            try await harness.startDaemon()
            try await harness.waitForWholeStream("trunc0", last: 500)
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)), arguments: ["deleted", "replaced"])
    func aCacheFileLostUnderTheDaemonIsWrittenAgainFromMemory(how: String) async throws {
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            try await harness.startDaemon()
            let (device, publisher) = try await Self.stream("lost0", broker, count: 100)
            try await harness.waitForWholeStream("lost0", last: 100)
            let edited = try await harness.cli(["edit", "lost0", "--name", "Kept name"])
            #expect(edited.status == 0, "\(edited.stderr)")

            if how == "deleted" {
                #expect(unlink(harness.database) == 0)
            } else {
                let other = harness.directory + "/other.sqlite"
                _ = try await runCommand("/usr/bin/sqlite3", [other, "CREATE TABLE unrelated (x)"])
                #expect(rename(other, harness.database) == 0)
            }
            let daemon = try #require(harness.daemon)
            // The file is back (written again) before the stream goes on: until then there is nothing to read.
            try await waitUntil(timeout: .seconds(15)) { daemon.log.contains("storage works again") }
            try await Self.publish(publisher, count: 100)
            try await harness.waitForWholeStream("lost0", last: 200, timeout: .seconds(60))
            #expect(daemon.log.contains("the cache file \(harness.database) "
                                        + (how == "deleted" ? "was deleted" : "was replaced")),
                    "\(daemon.log.suffix(2000))")
            let info = try await harness.info("lost0")
            #expect(info?["name"] == "Kept name", "the local tables were lost: \(String(describing: info))")
            if how == "replaced" {
                let names = try FileManager.default.contentsOfDirectory(atPath: harness.directory)
                #expect(names.contains { $0.hasPrefix("cache.sqlite.replaced-") }, "\(names)")
            }
            try await harness.waitForStorage("ok")
            // The file written again is the one SQLite works with: its WAL survives a kill (no connection to the old
            // file removed it by name).
            try await Self.publish(publisher, count: 100)
            try await harness.waitForWholeStream("lost0", last: 300)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(timeout: .seconds(10))
            #expect(try await sqlite3(harness.database, "PRAGMA integrity_check") == "ok")
            try await harness.expectWholeStream("lost0", last: 300)
            try await harness.startDaemon()
            try await harness.stopCleanly()
            try await harness.expectWholeStream("lost0", last: 300)
            await device.disconnect()
        }
    }

    /// A daemon with 50 reports of `id`'s stream in its cache, whose cache file is then made immutable: once it holds
    /// intake, 50 more reports are published (they wait at the broker). The caller clears the attribute.
    static func heldByAnImmutableCache(_ id: String, _ broker: MosquittoBroker, environment: [String: String] = [:])
        async throws -> (harness: AgentHarness, device: SimulatedDevice, publisher: StreamPublisher) {
        let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
        try await harness.startDaemon(environment: environment)
        let (device, publisher) = try await stream(id, broker, count: 50)
        try await harness.waitForWholeStream(id, last: 50)
        #expect(makeImmutable(harness.database))
        do {
            try await harness.waitForStorage("holding", naming: harness.database)
            try await publish(publisher, count: 50)
        } catch {
            clearImmutable(harness.database)
            throw error
        }
        return (harness, device, publisher)
    }

    @Test(.timeLimit(.minutes(2)),
          .enabled(if: canMakeImmutable, "chattr +i does not work on this file system; skipped"))
    func aCacheFileMadeImmutableHoldsNewMessagesUntilItIsWritable() async throws {
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let (harness, device, _) = try await Self.heldByAnImmutableCache("frozen0", broker)
            defer { clearImmutable(harness.database) }
            let daemon = try #require(harness.daemon)
            #expect(daemon.log.contains("is not writable"), "\(daemon.log.suffix(2000))")
            let text = try await harness.cli(["stats"])
            #expect(text.stdout.contains("Storage: holding") && text.stdout.contains(harness.database), "\(text.stdout)")
            // Held: nothing of the new reports reached the journal (the broker keeps them).
            let journaled = streamReports(in: try JournalFile(path: harness.journal).records).map(\.n)
            #expect(journaled.allSatisfy { $0 <= 50 }, "taken while the cache could not be written: \(journaled.max() ?? 0)")

            clearImmutable(harness.database)
            try await harness.waitForWholeStream("frozen0", last: 100, timeout: .seconds(60))
            try await harness.waitForStorage("ok")
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }

    /// SIGTERM while intake is held: the daemon stops at once (the message it waits on stays with the broker), and
    /// a start once the file is writable again brings everything.
    @Test(.timeLimit(.minutes(2)),
          .enabled(if: canMakeImmutable, "chattr +i does not work on this file system; skipped"))
    func aStopWhileHoldingIsPromptAndLosesNothing() async throws {
        try await withBroker(FaultTests.unboundedQueue) { broker in
            let (harness, device, _) = try await Self.heldByAnImmutableCache("stop0", broker)
            defer { clearImmutable(harness.database) }
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0, "a held daemon did not stop: \(daemon.log.suffix(2000))")
            clearImmutable(harness.database)
            try await harness.startDaemon()
            try await harness.waitForWholeStream("stop0", last: 100, timeout: .seconds(60))
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }

    /// The cache, its -wal and -shm, the journal, the storage status and the lock are 0600 even under umask 000.
    @Test(.timeLimit(.minutes(1)))
    func theDaemonsFilesArePrivateWhateverTheUmask() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let daemon = try DaemonProcess("/bin/sh", ["-c", "umask 000 && exec \"$0\" \"$@\"", thingAgentExecutable(),
                                                       "run"] + harness.commonArguments,
                                           logPath: harness.directory + "/daemon.log")
            try await waitUntil(timeout: .seconds(15)) { daemon.log.contains("connected and subscribed") }
            let device = try SimulatedDevice("private0", brokerURL: broker.url)
            try await device.connect()
            try await device.properties(#"{"switch_1":true}"#, time: t0 + 1)
            try await waitUntil(timeout: .seconds(15)) {
                (try? await sqlite3(harness.database, "SELECT count(*) FROM properties")) == "1"
            }
            for suffix in ["", "-wal", "-shm", ".journal", ".storage", ".lock"] {
                #expect(fileMode(harness.database + suffix) == 0o600, "\(harness.database + suffix)")
            }
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)

            // A cache others can read (an older version made it 0644) keeps its mode, with a warning at start.
            #expect(chmod(harness.database, 0o644) == 0)
            try await harness.startDaemon()
            #expect(harness.daemon?.log.contains("readable by other users") == true)
            #expect(fileMode(harness.database) == 0o644)
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }

    /// `network add` takes the Wi-Fi password as `--wifi-password`, from a file or stdin (`--wifi-password-file`),
    /// or, deprecated with a warning, as `--password`; never two at once. The cache file holding it is 0600.
    @Test(.timeLimit(.minutes(1)))
    func theWifiPasswordComesFromAFlagAFileOrStdin() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("wifi0", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Plug"}"#, time: t0 + 1)
            _ = try await harness.waitForInfo("wifi0") { $0["name"] == "Plug" }
            let file = harness.directory + "/wifi-password"
            try "from-a-file\n".write(toFile: file, atomically: true, encoding: .utf8)
            let viaFile = try await harness.cli(["network", "add", "wifi0", "FromFile", "--wifi-password-file", file])
            #expect(viaFile.status == 0, "\(viaFile.stderr)")
            let viaFlag = try await harness.cli(["network", "add", "wifi0", "FromFlag", "--wifi-password", "from-a-flag"])
            #expect(viaFlag.status == 0, "\(viaFlag.stderr)")
            let viaStdin = try await runCommand("/bin/sh", ["-c", "echo from-stdin | \"$0\" \"$@\"", thingAgentExecutable(),
                                                            "network", "add", "wifi0", "FromStdin",
                                                            "--wifi-password-file", "-", "--db", harness.database,
                                                            "--broker", broker.url])
            #expect(viaStdin.status == 0, "\(viaStdin.stderr)")
            let deprecated = try await harness.cli(["network", "add", "wifi0", "Old", "--password", "the-old-way"])
            #expect(deprecated.status == 0, "\(deprecated.stderr)")
            #expect(deprecated.stderr.contains("deprecated"), "\(deprecated.stderr)")
            let twice = try await harness.cli(["network", "add", "wifi0", "Twice", "--password", "a1234567",
                                               "--wifi-password", "b1234567"])
            #expect(twice.status == 2, "\(twice.stderr)")
            let empty = harness.directory + "/empty"
            try "".write(toFile: empty, atomically: true, encoding: .utf8)
            #expect(try await harness.cli(["network", "add", "wifi0", "Empty", "--wifi-password-file", empty]).status == 2)

            let stored = try await sqlite3(harness.database, """
                SELECT ssid || '=' || password FROM backup_networks WHERE dev_id = 'wifi0' ORDER BY ssid
                """)
            #expect(stored.split(separator: "\n") == ["FromFile=from-a-file", "FromFlag=from-a-flag",
                                                       "FromStdin=from-stdin", "Old=the-old-way"])
            #expect(fileMode(harness.database) == 0o600)
            try await harness.stopCleanly()
            await device.disconnect()
        }
    }
}
