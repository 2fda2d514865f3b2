import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// Crashes and stops of the broker and of the agent while reports stream in: the real daemon, a real mosquitto,
/// the cache file read back with the `sqlite3` shell. Random moments come from a seeded generator
/// (`THING_AGENT_FAULT_SEED` repeats a run). docs/faults.md says what each test proves.
@Suite("Faults: crashes and stops during a stream", .serialized)
struct FaultTests {
    /// The broker keeps QoS 1 reports for the agent's persistent session however many there are.
    static var unboundedQueue: MosquittoBroker.Options {
        var options = MosquittoBroker.Options()
        options.extraConfig = "max_queued_messages 0\n"
        return options
    }

    static func connectedDevices(_ prefix: String, _ count: Int, _ broker: MosquittoBroker) async throws
        -> [SimulatedDevice] {
        var devices: [SimulatedDevice] = []
        for index in 0..<count {
            let device = try SimulatedDevice("\(prefix)\(index)", brokerURL: broker.url)
            try await device.connect()
            devices.append(device)
        }
        return devices
    }

    /// Waits for a save of the broker's in-memory database that comes after everything done so far (the broker is
    /// single-threaded: a save logged after one more change includes every earlier one, such as the agent's session).
    static func waitForBrokerSave(_ broker: MosquittoBroker, marker: SimulatedDevice) async throws {
        let saves: @Sendable () -> Int = { broker.log().components(separatedBy: "Saving in-memory database").count }
        let before = saves()
        try await marker.client.publish("faults/marker", "change", qos: .atLeastOnce, retain: true)
        try await waitUntil(timeout: .seconds(5)) { saves() > before }
    }

    /// The retained message on `topic`, as a new subscriber gets it (nil when none comes within 5 s).
    static func retainedMessage(on topic: String, _ broker: MosquittoBroker) async throws -> String? {
        let client = try MQTTClient(configuration: MQTTConfiguration(
            url: broker.url, clientID: "retained-\(UInt32.random(in: 0...UInt32.max))"))
        try await client.connect()
        let messages = client.messages
        try await client.subscribe(topic, qos: .atLeastOnce)
        let text = await withTaskGroup(of: String?.self) { group in
            group.addTask {
                for await message in messages where message.topic == topic { return message.text }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(5))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        await client.disconnect()
        return text
    }

    // MARK: the broker

    @Test(.timeLimit(.minutes(4)))
    func brokerKilledAndRestartedDuringAStreamLosesNoQoS1Report() async throws {
        let seed = SeededGenerator.seed(for: #function)
        var random = SeededGenerator(seed: seed)
        var options = Self.unboundedQueue
        options.persistence = true
        try await withBroker(options) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            // The agent comes back a little after the devices do, so that reports reach a restarted broker while
            // the agent is away and must wait in its persistent session.
            try await harness.startDaemon(environment: [
                "THING_AGENT_RECONNECT_MIN": "0.4", "THING_AGENT_RECONNECT_MAX": "0.8",
            ])
            let devices = try await Self.connectedDevices("b", 4, broker)
            try await Self.waitForBrokerSave(broker, marker: devices[0])

            let lifetimes = BrokerLifetimes()
            let publishers = devices.map { StreamPublisher(device: $0, lifetimes: lifetimes) }
            let stop = StopFlag()
            let streams = runStreams(publishers, pause: .milliseconds(3), until: stop)
            // The broker logs each connection of the agent's client id.
            let agentConnections: @Sendable () -> Int = {
                broker.log().components(separatedBy: " as \(harness.clientID) (").count - 1
            }
            let kills = 4
            // Each kill lands in the middle of every stream, however slowly a loaded machine lets them run.
            let everyStreamPast: @Sendable (Int) async -> Bool = { count in
                for publisher in publishers where await publisher.last <= count { return false }
                return true
            }
            for kill in 1...kills {
                try await Task.sleep(for: random.milliseconds(300...900))
                // Long: under two suites at once the devices' reconnects after a restart took over 30 s.
                try await waitUntil(timeout: .seconds(60)) { await everyStreamPast(kill * 25) }
                broker.kill()
                lifetimes.brokerKilled()
                try await Task.sleep(for: random.milliseconds(0...300))
                try await broker.restart()
                // The agent is back on this broker before the next kill (meanwhile the devices, quicker to
                // reconnect, publish into its session).
                try await waitUntil(timeout: .seconds(10)) { agentConnections() > kill }
            }
            try await Task.sleep(for: .milliseconds(600))
            try await waitUntil(timeout: .seconds(30)) { await everyStreamPast(100) }
            stop.set()
            try await streams.value

            var republished = 0
            for publisher in publishers {
                let last = await publisher.last
                #expect(last > 100, "seed \(seed): the stream of \(publisher.device.id) hardly ran")
                try await harness.waitForWholeStream(publisher.device.id, last: last)
                republished += await publisher.republished
            }
            #expect(agentConnections() == kills + 1, "seed \(seed): \(broker.log().suffix(3000))")
            #expect(republished > 0)

            // The broker loses its file as well: the agent's session is gone, and it must subscribe again.
            broker.kill()
            try FileManager.default.removeItem(atPath: broker.persistenceFile)
            try await broker.restart()
            let probe = devices[0]
            var attempt = 0
            let deadline = ContinuousClock.now + .seconds(15)
            while try await harness.info(probe.id)?["properties"]?["probe"] == nil {
                #expect(ContinuousClock.now < deadline, "the agent did not subscribe again after the broker lost its session")
                if ContinuousClock.now > deadline { break }
                attempt += 1
                try? await probe.properties("{\"probe\":\(attempt)}", time: t0 + 10_000_000 + Int64(attempt))
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(harness.daemon?.isRunning == true)
            for device in devices { await device.disconnect() }
        }
    }

    // MARK: the agent

    @Test(.timeLimit(.minutes(2)))
    func agentKilledAtRandomMomentsLosesNothingAndRollsNothingBack() async throws {
        let seed = SeededGenerator.seed(for: #function)
        var random = SeededGenerator(seed: seed)
        try await withBroker(Self.unboundedQueue) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            // Batches gather for 250 ms, so that most kills land with acknowledged reports in the journal only.
            let environment = ["THING_AGENT_FLUSH_INTERVAL": "0.25"]
            try await harness.startDaemon(environment: environment)
            let devices = try await Self.connectedDevices("k", 4, broker)
            let publishers = devices.map { StreamPublisher(device: $0) }
            let stop = StopFlag()
            let streams = runStreams(publishers, pause: .milliseconds(2), until: stop)

            var journaledOnly = 0
            for kill in 1...5 {
                try await Task.sleep(for: random.milliseconds(150...700))
                let daemon = try #require(harness.daemon)
                daemon.signal(SIGKILL)
                #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) != nil)
                // What the killed agent had acknowledged: SQLite, plus the journal records SQLite had not seen yet.
                let stored = try await harness.counters()
                let tail = streamReports(in: try await JournalFile(path: harness.journal)
                    .unflushed(database: harness.database))
                journaledOnly += tail.count

                try await Task.sleep(for: random.milliseconds(0...300))
                // Up to 30 s: on a busy machine the restarted agent's announcement waits behind the backlog the
                // broker kept for it, and "connected and subscribed" comes after that.
                try await harness.startDaemon(environment: environment, timeout: .seconds(30))
                // Started: the journal was replayed into SQLite before the broker was contacted.
                let restored = try await harness.counters()
                for (device, n) in stored {
                    #expect(restored[device] ?? 0 >= n, "seed \(seed), kill \(kill): \(device) rolled back from \(n)")
                }
                for device in Set(tail.map(\.device)) {
                    let numbers = try await harness.reportNumbers(device)
                    let lost = tail.filter { $0.device == device && !numbers.contains($0.n) }.map(\.n)
                    #expect(lost.isEmpty, """
                        seed \(seed), kill \(kill): \(lost.count) journaled reports of \(device) lost: \(lost.prefix(10))
                        """)
                }
                if !tail.isEmpty {
                    #expect(harness.daemon?.log.contains("replayed the journal") == true)
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            stop.set()
            try await streams.value
            for publisher in publishers {
                try await harness.waitForInfoCounter(publisher.device.id, await publisher.last)
            }

            // A final clean stop, then the file alone, as the sqlite3 shell sees it.
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            for publisher in publishers {
                try await harness.expectWholeStream(publisher.device.id, last: await publisher.last)
            }
            #expect(try await sqlite3(harness.database, "PRAGMA integrity_check") == "ok")
            #expect(journaledOnly > 0, "seed \(seed): no kill caught reports in the journal only")
            for device in devices { await device.disconnect() }
        }
    }

    /// Batches that would wait 30 s keep a burst in the journal only; the agent is killed right after the burst,
    /// and started again with no broker, so only the journal can bring the burst back.
    @Test(.timeLimit(.minutes(1)))
    func killRightAfterABurstStillEndsWithTheBurstInSQLite() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            try await harness.startDaemon(environment: ["THING_AGENT_FLUSH_INTERVAL": "30"])
            let devices = try await Self.connectedDevices("j", 2, broker)
            let publishers = devices.map { StreamPublisher(device: $0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for publisher in publishers {
                    group.addTask { for _ in 0..<300 { try await publisher.publishNext() } }
                }
                try await group.waitForAll()
            }
            // The agent journals each report before it acknowledges it.
            try await waitUntil(timeout: .seconds(15)) {
                ((try? JournalFile(path: harness.journal))?.records.count ?? 0) >= 600
            }
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(timeout: .seconds(5))
            #expect(try await sqlite3(harness.database, "SELECT count(*) FROM properties") == "0",
                    "the burst reached SQLite before the kill: the test no longer shows the journal at work")

            try await harness.startDaemon(offline: true)
            #expect(harness.daemon?.log.contains("replayed the journal records=600") == true)
            for device in devices { try await harness.expectWholeStream(device.id, last: 300) }
            let stopping = try #require(harness.daemon)
            stopping.signal(SIGTERM)
            #expect(await stopping.waitForExit(timeout: DaemonProcess.hangBound) == 0, "SIGTERM while waiting for the broker")
            for device in devices { try await harness.expectWholeStream(device.id, last: 300) }
            for device in devices { await device.disconnect() }
        }
    }

    /// A crash in the middle of a journal write (or a power cut) leaves a torn or corrupt last record, or bytes that
    /// are no record after the last one: start-up replays the whole records before them, ignores the rest, and the
    /// journal works on afterwards.
    @Test(.timeLimit(.minutes(1)), arguments: ["truncated", "corrupt", "garbage after the end"])
    func aTornJournalTailIsIgnoredAndTheRecordsBeforeItReplayed(damage: String) async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            let environment = ["THING_AGENT_FLUSH_INTERVAL": "30"]
            try await harness.startDaemon(environment: environment)
            let device = try SimulatedDevice("torn", brokerURL: broker.url)
            try await device.connect()
            let publisher = StreamPublisher(device: device)
            for _ in 0..<20 { try await publisher.publishNext() }
            try await waitUntil(timeout: .seconds(10)) {
                ((try? JournalFile(path: harness.journal))?.records.count ?? 0) >= 20
            }
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit(timeout: .seconds(5))

            let journal = try JournalFile(path: harness.journal)
            let last = try #require(journal.records.last)
            let handle = try #require(FileHandle(forUpdatingAtPath: harness.journal))
            var random = SeededGenerator(seed: SeededGenerator.seed(for: #function + damage))
            let garbage = (0..<100).map { _ in UInt8.random(in: 0...255, using: &random) }
            switch damage {
            case "truncated":
                try handle.truncate(atOffset: UInt64(last.offset + last.length / 2))
            case "corrupt":
                // One flipped byte in the last record's payload, and garbage after it.
                try handle.seek(toOffset: UInt64(last.offset + last.length - 3))
                let byte = try #require(try handle.read(upToCount: 1)?.first)
                try handle.seek(toOffset: UInt64(last.offset + last.length - 3))
                try handle.write(contentsOf: [byte ^ 0x20])
                try handle.write(contentsOf: garbage)
            default:
                try handle.seek(toOffset: UInt64(journal.end))
                try handle.write(contentsOf: garbage)
            }
            try handle.close()
            let intact = damage == "garbage after the end" ? 20 : 19

            try await harness.startDaemon(offline: true)
            #expect(harness.daemon?.log.contains("replayed the journal records=\(intact)") == true,
                    "\(harness.daemon?.log ?? "")")
            try await harness.expectWholeStream("torn", last: intact)
            let offline = try #require(harness.daemon)
            offline.signal(SIGTERM)
            #expect(await offline.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            // The damaged journal was emptied into a new generation: nothing of it is read again.
            let fresh = try JournalFile(path: harness.journal)
            #expect(fresh.records.isEmpty && fresh.generation > journal.generation)

            // And the agent works on: a new report is journaled, applied and kept.
            try await harness.startDaemon()
            try await device.properties(#"{"after":true}"#, time: t0 + 100)
            _ = try await harness.waitForInfo("torn") { $0["properties"]?["after"] == true }
            let running = try #require(harness.daemon)
            running.signal(SIGTERM)
            #expect(await running.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            #expect(try await sqlite3(harness.database, "SELECT value FROM properties WHERE code = 'after'") == "true")
            try await harness.expectWholeStream("torn", last: intact)
            await device.disconnect()
        }
    }

    // MARK: a graceful stop

    /// A batch gathering in memory (here for up to an hour) does not hold up a stop: SIGTERM writes it at once.
    /// The pause is far longer than the hang bound, so a stop that waited it out cannot pass.
    @Test(.timeLimit(.minutes(1)))
    func sigtermWritesAGatheringBatchAtOnce() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            try await harness.startDaemon(environment: ["THING_AGENT_FLUSH_INTERVAL": "3600"])
            let device = try SimulatedDevice("batch", brokerURL: broker.url)
            try await device.connect()
            let publisher = StreamPublisher(device: device)
            for _ in 0..<50 { try await publisher.publishNext() }
            try await waitUntil(timeout: .seconds(10)) {
                ((try? JournalFile(path: harness.journal))?.records.count ?? 0) >= 50
            }
            #expect(try await sqlite3(harness.database, "SELECT count(*) FROM properties") == "0")
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            try await harness.expectWholeStream("batch", last: 50)
            await device.disconnect()
        }
    }

    /// The stop does not wait for the flood: the devices publish on, back to back, until the daemon has exited (a
    /// stop that waited for the stream to end would never come), and what it had not taken waits at the broker for
    /// the next start.
    @Test(.timeLimit(.minutes(2)))
    func sigtermUnderLoadExitsCleanlyAndLeavesTheRestAtTheBroker() async throws {
        try await withBroker(Self.unboundedQueue) { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: streamDaemonSettings)
            try await harness.startDaemon()
            let devices = try await Self.connectedDevices("s", 4, broker)
            let publishers = devices.map { StreamPublisher(device: $0) }
            let stop = StopFlag()
            let streams = runStreams(publishers, pause: nil, until: stop)
            try await Task.sleep(for: .milliseconds(700))

            let daemon = try #require(harness.daemon)
            let signalled = ContinuousClock.now
            daemon.signal(SIGTERM)
            let status = await daemon.waitForExit(timeout: DaemonProcess.hangBound)
            let took = ContinuousClock.now - signalled
            #expect(status == 0, "exit \(String(describing: status)) after \(took): \(daemon.log.suffix(1500))")
            stop.set()
            try await streams.value
            // It said goodbye: its retained announcement is the offline one.
            let announcement = try await Self.retainedMessage(on: "thing-agent/agents/\(harness.clientID)/status", broker)
            #expect(announcement?.contains("\"offline\"") == true, "\(announcement ?? "no announcement")")

            #expect(try await sqlite3(harness.database, "PRAGMA integrity_check") == "ok")
            // A graceful stop writes everything it took to SQLite: nothing is left for the journal to replay.
            let unflushed = try await JournalFile(path: harness.journal).unflushed(database: harness.database)
            #expect(unflushed.isEmpty, "\(unflushed.count) journal records not in SQLite after a graceful stop")
            let taken = try await harness.counters()
            #expect(taken.count == devices.count && taken.values.allSatisfy { $0 > 0 }, "\(taken)")
            // The file alone holds it all (the WAL went into it): what a copy or a backup of it would get.
            let copy = harness.directory + "/copy.sqlite"
            try FileManager.default.copyItem(atPath: harness.database, toPath: copy)
            let rows = "SELECT count(*), sum(value) FROM properties"
            #expect(try await sqlite3(copy, rows) == (try await sqlite3(harness.database, rows)))

            // The rest of the stream waited at the broker and arrives after the restart.
            try await harness.startDaemon(timeout: .seconds(30))
            #expect(harness.daemon?.log.contains("replayed the journal") == false)
            for publisher in publishers {
                try await harness.waitForWholeStream(publisher.device.id, last: await publisher.last)
            }
            for device in devices { await device.disconnect() }
        }
    }
}

extension AgentHarness {
    /// Polls `info --json` until `device`'s counter shows `last`.
    func waitForInfoCounter(_ device: String, _ last: Int) async throws {
        _ = try await waitForInfo(device, timeout: .seconds(30)) { $0["properties"]?["counter"] == .integer(Int64(last)) }
    }
}
