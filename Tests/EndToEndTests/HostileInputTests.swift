import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// Hostile input on the wire and unusable cache files on disk, against the real daemon. docs/faults.md says what
/// each test proves.
@Suite("Faults: hostile input and bad cache files", .serialized)
struct HostileInputTests {
    // MARK: hostile topics and payloads

    /// A hostile client's messages that the broker took (a QoS 1 publish it acknowledged), by expected outcome.
    struct Sent {
        var byReason: [String: Int] = [:]
        /// Refused by libmosquitto before sending (control characters in a topic): never reach the agent.
        var refusedByTheClient: [String] = []
        var total: Int { byReason.values.reduce(0, +) }
    }

    /// Publishes each message once at QoS 1; returns whether the broker acknowledged it.
    static func send(_ client: MQTTClient, _ topic: String, _ payload: [UInt8]) async throws -> Bool {
        do {
            try await client.publish(topic, payload: payload, qos: .atLeastOnce)
            return true
        } catch where error.code == 18 {
            return false  // MOSQ_ERR_MALFORMED_UTF8: libmosquitto does not send such a topic
        }
    }

    /// What `info --json` and the cache file say about a device, without the one field that moves with the clock.
    static func snapshot(_ harness: AgentHarness, _ device: String) async throws -> String {
        var info = try #require(try await harness.info(device))
        info["wifiSignalAge"] = nil
        let row = try await sqlite3(harness.database, "SELECT * FROM devices WHERE dev_id = '\(device)'")
        let properties = try await sqlite3(harness.database, """
            SELECT code, value, time FROM properties WHERE dev_id = '\(device)' ORDER BY code
            """)
        return JSONValue.object(info).serialized() + "\n" + row + "\n" + properties
    }

    @Test(.timeLimit(.minutes(2)))
    func hostileTopicsAndPayloadsChangeNothingAndEveryMessageIsCounted() async throws {
        let seed = SeededGenerator.seed(for: #function)
        var random = SeededGenerator(seed: seed)
        var options = MosquittoBroker.Options()
        options.extraConfig = "max_queued_messages 0\n"
        try await withBroker(options) { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let client = try MQTTClient(configuration: MQTTConfiguration(
                url: broker.url, clientID: "hostile-\(UInt32.random(in: 0...UInt32.max))"))
            try await client.connect()

            // Two devices with a full, valid state; from now on they only get invalid messages.
            let victims = ["victim-1", "victim:2"]
            for victim in victims {
                for (suffix, payload) in HostileCorpus.baseline(victim) {
                    #expect(try await Self.send(client, "things/\(victim)/thing/\(suffix)", Array(payload.utf8)))
                }
            }
            let baseline = victims.count * HostileCorpus.baseline("x").count
            var stats = try await harness.waitForStats(received: baseline)
            #expect(stats["applied"] == .integer(Int64(baseline)), "\(stats)")
            var before: [String: String] = [:]
            for victim in victims { before[victim] = try await Self.snapshot(harness, victim) }

            // 1. A corpus of known outcome: every message on a victim's topics is invalid, or its topic is.
            var sent = Sent()
            for entry in HostileCorpus.messages(victims: victims) {
                if try await Self.send(client, entry.topic, entry.payload) {
                    sent.byReason[entry.reason, default: 0] += 1
                } else {
                    sent.refusedByTheClient.append(entry.topic)
                }
            }
            // Only topics with control characters are refused, by libmosquitto itself (MQTT forbids them).
            #expect(sent.refusedByTheClient.allSatisfy { $0.unicodeScalars.contains { $0.properties.generalCategory == .control } },
                    "\(sent.refusedByTheClient)")
            #expect(sent.refusedByTheClient.count == HostileCorpus.controlCharacterIDs.count * 2)
            stats = try await harness.waitForStats(received: baseline + sent.total)
            #expect(stats["received"] == .integer(Int64(baseline + sent.total)))
            #expect(stats["applied"] == .integer(Int64(baseline)), "an invalid message changed the cache: \(stats)")
            #expect(stats["unchanged"] == .integer(Int64(sent.byReason["unchanged"] ?? 0)), "\(stats)")
            #expect(stats["forOtherClients"] == .integer(Int64(sent.byReason["forOtherClients"] ?? 0)), "\(stats)")
            for reason in ["invalidDeviceID", "malformed", "oversized"] {
                #expect(stats["dropped"]?[reason] == .integer(Int64(sent.byReason[reason] ?? 0)), "\(reason): \(stats)")
            }
            #expect(stats["droppedTotal"] == .integer(Int64(
                sent.total - (sent.byReason["unchanged"] ?? 0) - (sent.byReason["forOtherClients"] ?? 0))))

            // 2. Seeded random and mutated topics and payloads, of unknown outcome: each must still be counted.
            var randomSent = 0
            for _ in 0..<400 {
                let (topic, payload) = HostileCorpus.randomMessage(using: &random)
                if try await Self.send(client, topic, payload) { randomSent += 1 }
            }
            let total = baseline + sent.total + randomSent
            stats = try await harness.waitForStats(received: total)
            let applied = stats["applied"]?.int64Value ?? -1, unchanged = stats["unchanged"]?.int64Value ?? -1
            let dropped = stats["droppedTotal"]?.int64Value ?? -1
            let forOthers = stats["forOtherClients"]?.int64Value ?? -1
            #expect(stats["received"] == .integer(Int64(total)), "seed \(seed): \(stats)")
            #expect(applied + unchanged + forOthers + dropped == Int64(total), "seed \(seed): \(stats)")
            let reasons = stats["dropped"]?.objectValue.map { $0.reduce(0) { $0 + ($1.value.int64Value ?? 0) } }
            #expect(reasons == dropped)

            // Nothing of it reached the victims, and the daemon is alive and well.
            for victim in victims {
                #expect(try await Self.snapshot(harness, victim) == before[victim], "seed \(seed): \(victim) changed")
            }
            let daemon = try #require(harness.daemon)
            #expect(daemon.isRunning, "seed \(seed): \(daemon.log.suffix(3000))")
            let devices = try await harness.cli(["devices", "--json"])
            let ids = try #require(try JSONParser.parse(devices.stdout).arrayValue).compactMap { $0["devId"]?.stringValue }
            #expect(ids.allSatisfy(HostileCorpus.isValidDeviceID), "stored device ids: \(ids)")
            #expect(Set(victims).isSubset(of: Set(ids)))
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
            #expect(try await sqlite3(harness.database, "PRAGMA integrity_check") == "ok")
            await client.disconnect()
        }
    }

    // MARK: unusable cache files

    /// `thing-agent run` on `database`, with no broker (it must fail before it would need one).
    static func run(database: String) async throws -> ProcessResult {
        try await runCommand(thingAgentExecutable(), [
            "run", "--db", database, "--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())",
        ], timeout: .seconds(10))
    }

    /// A real cache file with one device in it, made by the daemon and closed by SIGTERM.
    static func makeCache(_ database: String) async throws {
        let daemon = try DaemonProcess(thingAgentExecutable(), [
            "run", "--db", database, "--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())",
        ], logPath: database + ".log")
        try await waitUntil(timeout: .seconds(10)) { daemon.log.contains("cache loaded") }
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        _ = try await runCommand("/usr/bin/sqlite3", [database, """
            INSERT INTO devices (dev_id, name, first_seen, updated_at) VALUES ('kept', 'Kept', 1, 1)
            """])
        try FileManager.default.removeItem(atPath: database + ".log")
    }

    /// The refusal every bad file gets: exit 1 at once, an error naming the path and saying why.
    static func expectRefused(_ result: ProcessResult, naming path: String, because cause: String,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 1, "exit \(result.status): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(path) && result.stderr.contains(cause), "\(result.stderr)",
                sourceLocation: sourceLocation)
    }

    @Test(.timeLimit(.minutes(1)))
    func aMissingDirectoryIsRefusedNamingIt() async throws {
        let directory = try makeTemporaryDirectory("faults-db")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await Self.run(database: directory + "/missing/cache.sqlite")
        Self.expectRefused(result, naming: directory + "/missing", because: "does not exist")
        #expect(directorySnapshot(directory).isEmpty)
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["random bytes", "a text file"])
    func aFileThatIsNotACacheIsRefusedAndLeftAlone(content: String) async throws {
        let directory = try makeTemporaryDirectory("faults-db")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/cache.sqlite"
        var random = SeededGenerator(seed: SeededGenerator.seed(for: #function))
        let bytes = content == "a text file"
            ? Data("# notes\nthis is not a database, but someone's text file\n".utf8)
            : Data((0..<65_536).map { _ in UInt8.random(in: 0...255, using: &random) })
        try bytes.write(to: URL(fileURLWithPath: database))
        let before = directorySnapshot(directory)
        let result = try await Self.run(database: database)
        Self.expectRefused(result, naming: database, because: "not a database")
        #expect(directorySnapshot(directory) == before, "the file was changed, or files were created beside it")
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: canMakeImmutable, "chattr +i is not available: root ignores modes"))
    func aReadOnlyCacheFileIsRefusedAndLeftAlone() async throws {
        let directory = try makeTemporaryDirectory("faults-db")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/cache.sqlite"
        try await Self.makeCache(database)
        let before = directorySnapshot(directory)
        try #require(makeImmutable(database))
        defer { clearImmutable(database) }
        let result = try await Self.run(database: database)
        Self.expectRefused(result, naming: database, because: "not writable")
        clearImmutable(database)
        #expect(directorySnapshot(directory) == before)
        #expect(try await sqlite3(database, "SELECT name FROM devices") == "Kept")
    }

    @Test(.timeLimit(.minutes(1)), .enabled(if: canMakeImmutable, "chattr +i is not available: root ignores modes"),
          arguments: [false, true])
    func aReadOnlyDirectoryIsRefusedAndLeftAlone(withACache: Bool) async throws {
        let parent = try makeTemporaryDirectory("faults-db")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let directory = parent + "/locked"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let database = directory + "/cache.sqlite"
        if withACache { try await Self.makeCache(database) }
        let before = directorySnapshot(directory)
        try #require(makeImmutable(directory))
        defer { clearImmutable(directory) }
        let result = try await Self.run(database: database)
        Self.expectRefused(result, naming: database, because: withACache ? "unable to open" : "is not writable")
        clearImmutable(directory)
        #expect(directorySnapshot(directory) == before)
    }

    @Test(.timeLimit(.minutes(1)))
    func aJournalThatIsNotAJournalIsRefusedAndLeftAlone() async throws {
        let directory = try makeTemporaryDirectory("faults-db")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = directory + "/cache.sqlite"
        try await Self.makeCache(database)
        var random = SeededGenerator(seed: SeededGenerator.seed(for: #function))
        let garbage = Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) })
        try garbage.write(to: URL(fileURLWithPath: database + ".journal"))
        let result = try await Self.run(database: database)
        Self.expectRefused(result, naming: database + ".journal", because: "journal")
        #expect(FileManager.default.contents(atPath: database + ".journal") == garbage)
        #expect(try await sqlite3(database, "SELECT name FROM devices") == "Kept")
    }
}
