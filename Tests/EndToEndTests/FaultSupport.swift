import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
import ThingAgent

// Helpers of the fault-injection tests (FaultTests.swift): seeded randomness, the cache file seen through the
// `sqlite3` shell, the journal read with the test's own reading of its format, and publishers that survive
// broker crashes.

/// Every random moment and input of the fault tests comes from the package's `SeededGenerator` (SplitMix64), so a
/// failing run can be repeated with `THING_AGENT_FAULT_SEED=<seed> swift test --filter FaultTests`.
extension SeededGenerator {
    /// The seed of one test: `THING_AGENT_FAULT_SEED` when set, otherwise a fixed one, so runs repeat.
    /// Mixed with the test's name so that tests do not share their random sequences.
    static func seed(for test: String) -> UInt64 {
        let base = ProcessInfo.processInfo.environment["THING_AGENT_FAULT_SEED"].flatMap { UInt64($0) } ?? 20_251_130
        // FNV-1a of the name: stable across runs (unlike `hashValue`).
        let salt = test.utf8.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        return base ^ salt
    }

    mutating func milliseconds(_ range: ClosedRange<Int>) -> Duration {
        .milliseconds(Int.random(in: range, using: &self))
    }
}

/// Runs `sql` with the `sqlite3` shell, read-only (it must neither checkpoint nor remove the WAL the daemon left),
/// and returns its output without the trailing newline.
func sqlite3(_ path: String, _ sql: String) async throws -> String {
    let result = try await runCommand("/usr/bin/sqlite3", ["-readonly", "-bail", "-cmd", ".timeout 5000", path, sql])
    guard result.status == 0 else { throw TestSupportError("sqlite3 \(path) \"\(sql)\": \(result.stderr)") }
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The journal `<db>.journal` as the test reads it, independently of the agent's code (docs/faults.md): a 16-byte
/// header ("TAJ2", 4 reserved bytes, a little-endian UInt64 generation), then records of UInt32 total length,
/// UInt32 CRC-32 of the rest of the record, UInt64 generation, Int64 arrival time, UInt16 topic length, the topic
/// and the payload. The file is allocated ahead (zeros after the last record); a record whose length, generation
/// or CRC does not fit ends the journal.
struct JournalFile {
    struct Record {
        var offset: Int
        var length: Int
        var topic: String
        var payload: [UInt8]
    }

    static let headerSize = 16
    static let recordHeaderSize = 26

    let generation: UInt64
    /// The whole records of the current generation, in order (a torn or corrupt record ends them).
    let records: [Record]
    /// Where the next record would go.
    var end: Int { records.last.map { $0.offset + $0.length } ?? Self.headerSize }

    init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), data.count >= Self.headerSize else {
            throw TestSupportError("no journal at \(path)")
        }
        let bytes = [UInt8](data)
        guard bytes[0..<4] == Array("TAJ2".utf8)[...] else { throw TestSupportError("\(path) is not a journal") }
        func integer(_ offset: Int, _ width: Int) -> UInt64 {
            (0..<width).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
        }
        generation = integer(8, 8)
        var records: [Record] = []
        var offset = Self.headerSize
        while offset + Self.recordHeaderSize <= bytes.count {
            let length = Int(integer(offset, 4))
            guard length >= Self.recordHeaderSize, offset + length <= bytes.count,
                  integer(offset + 8, 8) == generation,
                  crc32(bytes[(offset + 8)..<(offset + length)]) == UInt32(integer(offset + 4, 4)) else { break }
            let topicLength = Int(integer(offset + 24, 2))
            let topicEnd = offset + Self.recordHeaderSize + topicLength
            guard topicEnd <= offset + length else { break }
            let topic = String(decoding: bytes[(offset + Self.recordHeaderSize)..<topicEnd], as: UTF8.self)
            records.append(Record(offset: offset, length: length, topic: topic,
                                  payload: Array(bytes[topicEnd..<(offset + length)])))
            offset += length
        }
        self.records = records
    }

    /// The records SQLite does not hold yet, by the position the flusher wrote into `meta` with each batch.
    func unflushed(database: String) async throws -> [Record] {
        let rows = try await sqlite3(database, """
            SELECT key, value FROM meta WHERE key IN ('journal_generation', 'journal_applied') ORDER BY key
            """)
        var position: [String: Int] = [:]
        for line in rows.split(separator: "\n") {
            let parts = line.split(separator: "|")
            if parts.count == 2 { position[String(parts[0])] = Int(parts[1]) }
        }
        let storedGeneration = UInt64(position["journal_generation"] ?? 0)
        if generation < storedGeneration { return [] }
        let applied = generation == storedGeneration ? position["journal_applied"] ?? 0 : 0
        return records.filter { $0.offset >= applied }
    }
}

/// CRC-32 (IEEE), bit by bit.
func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
    var crc = ~UInt32(0)
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
    }
    return ~crc
}

/// A property report of the streams below: `counter` is the report's number `n`, and `r<n>` a property of its own,
/// so that a lost report shows as a missing property and the last value of every property is known.
func streamReport(_ n: Int) -> String {
    "{\"counter\":\(n),\"r\(n)\":\(n)}"
}

/// Reads `streamReport`s back out of journal records: device id and report number.
func streamReports(in records: [JournalFile.Record]) -> [(device: String, n: Int)] {
    records.compactMap { record in
        let levels = record.topic.split(separator: "/")
        guard levels.count == 4, levels[3] == "properties",
              let n = (try? JSONParser.parse(record.payload))?["data"]?["counter"]?.int64Value else { return nil }
        return (String(levels[1]), Int(n))
    }
}

/// How many times the broker was killed so far: the publishers' way to tell which broker acknowledged a report.
final class BrokerLifetimes: Sendable {
    private let count = Atomic<Int>(0)

    var current: Int { count.load(ordering: .sequentiallyConsistent) }

    /// Call right after killing the broker, before starting it again.
    func brokerKilled() {
        count.add(1, ordering: .sequentiallyConsistent)
    }
}

/// A stream reports a new property code with every report (`r<n>`): far more than a device's default
/// `maxPropertiesPerDevice`, so the daemons of the stream tests run with a high one.
let streamDaemonSettings = ["THING_AGENT_MAX_PROPERTIES": "1000000"]

/// One device's stream of QoS 1 `streamReport`s, kept whole through broker crashes.
///
/// A report counts as published once a broker acknowledged it. A broker killed with SIGKILL loses what it had not
/// saved yet (the test broker saves every second), so every report acknowledged by a broker that was killed since
/// is published again, in order and with its original time, before the next new one: the last report of the
/// stream, and every `r<n>`, are then certain to have reached a broker that survived. Republished reports the
/// agent already had are repeats, which change nothing.
actor StreamPublisher {
    let device: SimulatedDevice
    let lifetimes: BrokerLifetimes
    /// Reports and the broker lifetime that acknowledged them (a report whose acknowledgement may have come from
    /// either side of a kill is put on the earlier side, so it is published again).
    private var acknowledged: [(n: Int, lifetime: Int)] = []
    private(set) var last = 0
    private(set) var republished = 0

    init(device: SimulatedDevice, lifetimes: BrokerLifetimes = BrokerLifetimes()) {
        self.device = device
        self.lifetimes = lifetimes
    }

    func publishNext() async throws {
        try await republishAfterRestarts()
        let lifetime = lifetimes.current
        try await send(last + 1)
        last += 1
        acknowledged.append((last, lifetime))
    }

    /// Publishes again what brokers killed since acknowledged; call once more at the end of the stream.
    func republishAfterRestarts() async throws {
        while true {
            let current = lifetimes.current
            let lost = acknowledged.filter { $0.lifetime < current }.map(\.n)
            guard !lost.isEmpty else { return }
            acknowledged.removeAll { $0.lifetime < current }
            for n in lost {
                let lifetime = lifetimes.current
                try await send(n)
                acknowledged.append((n, lifetime))
            }
            republished += lost.count
        }
    }

    /// Publishes report `n` until a broker acknowledges it (the client reconnects by itself after a kill).
    private func send(_ n: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            do {
                try await device.properties(streamReport(n), time: t0 + Int64(n))
                return
            } catch {
                if ContinuousClock.now > deadline { throw error }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}

/// A flag the streams poll to know when to end.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

/// Runs each publisher's stream (one report every `pause`, or back to back when nil) until `stop` is set.
func runStreams(_ publishers: [StreamPublisher], pause: Duration?, until stop: StopFlag) -> Task<Void, any Error> {
    Task {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for publisher in publishers {
                group.addTask {
                    while !stop.isSet {
                        try await publisher.publishNext()
                        if let pause { try await Task.sleep(for: pause) }
                    }
                    try await publisher.republishAfterRestarts()
                }
            }
            try await group.waitForAll()
        }
    }
}

extension AgentHarness {
    var journal: String { database + ".journal" }

    /// `thing-agent stats --json`, parsed.
    func stats() async throws -> JSONObject {
        let result = try await cli(["stats", "--json"])
        guard result.status == 0, let object = try JSONParser.parse(result.stdout).objectValue else {
            throw TestSupportError("thing-agent stats failed (\(result.status)): \(result.stderr)")
        }
        return object
    }

    /// Waits until the daemon's counters in the cache file show `received` messages, each with its outcome (the
    /// outcome is counted just after the arrival, so a snapshot taken in between is one message short).
    func waitForStats(received: Int, timeout: Duration = .seconds(20)) async throws -> JSONObject {
        let deadline = ContinuousClock.now + timeout
        while true {
            let stats = try await stats()
            let counted = stats["received"]?.int64Value ?? 0
            let outcomes = (stats["applied"]?.int64Value ?? 0) + (stats["unchanged"]?.int64Value ?? 0)
                + (stats["droppedTotal"]?.int64Value ?? 0) + (stats["forOtherClients"]?.int64Value ?? 0)
            if counted >= Int64(received), outcomes >= counted { return stats }
            if ContinuousClock.now > deadline {
                throw TestSupportError("the daemon counted \(JSONValue.object(stats).serialized()), not \(received) received; "
                    + "log: \(daemon?.log.suffix(3000) ?? "")")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Waits until the cache file holds `last` reports of `device`'s stream, then checks them one by one.
    func waitForWholeStream(_ device: String, last: Int, timeout: Duration = .seconds(30),
                            sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let counts = try await sqlite3(database, """
                SELECT count(*) FROM properties WHERE dev_id = '\(device)' AND code GLOB 'r[0-9]*'
                """)
            if Int(counts) ?? 0 >= last { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try await expectWholeStream(device, last: last, sourceLocation: sourceLocation)
    }

    /// The `counter` of every device in the cache file.
    func counters() async throws -> [String: Int] {
        let rows = try await sqlite3(database, "SELECT dev_id, value FROM properties WHERE code = 'counter'")
        var counters: [String: Int] = [:]
        for line in rows.split(separator: "\n") {
            let parts = line.split(separator: "|")
            if parts.count == 2, let n = Int(parts[1]) { counters[String(parts[0])] = n }
        }
        return counters
    }

    /// The report numbers of `device`'s stream that the cache file holds.
    func reportNumbers(_ device: String) async throws -> Set<Int> {
        let rows = try await sqlite3(database, """
            SELECT substr(code, 2) FROM properties WHERE dev_id = '\(device)' AND code GLOB 'r[0-9]*'
            """)
        return Set(rows.split(separator: "\n").compactMap { Int($0) })
    }

    /// Every `streamReport` of `device` up to `last` is in the cache file, and `counter` holds `last` at its time.
    func expectWholeStream(_ device: String, last: Int, sourceLocation: SourceLocation = #_sourceLocation)
        async throws {
        let counter = try await sqlite3(database, """
            SELECT value || '@' || time FROM properties WHERE dev_id = '\(device)' AND code = 'counter'
            """)
        #expect(counter == "\(last)@\(t0 + Int64(last))", "counter of \(device)", sourceLocation: sourceLocation)
        let rows = try await sqlite3(database, """
            SELECT substr(code, 2), value FROM properties WHERE dev_id = '\(device)' AND code GLOB 'r[0-9]*'
            """)
        var seen = Set<Int>()
        for line in rows.split(separator: "\n") {
            let parts = line.split(separator: "|")
            if parts.count == 2, parts[0] == parts[1], let n = Int(parts[0]) { seen.insert(n) }
        }
        let missing = (1...max(last, 1)).filter { !seen.contains($0) }
        #expect(missing.isEmpty && seen.count == last,
                "\(device): \(missing.count) of \(last) reports missing (first: \(missing.prefix(10))), \(seen.count) seen",
                sourceLocation: sourceLocation)
    }
}

/// Makes a file or directory unwritable even for root (tests run as root, which ignores modes): the immutable
/// attribute, as the SQLite tests do. Returns false when `chattr` cannot do it here.
func makeImmutable(_ path: String) -> Bool {
    guard chattr("+i", path) else { return false }
    let probe = isDirectory(path) ? path + "/.probe" : path
    let fd = open(probe, isDirectory(path) ? O_CREAT | O_WRONLY : O_WRONLY, 0o644)
    if fd >= 0 {
        close(fd)
        if probe != path { unlink(probe) }
        _ = chattr("-i", path)
        return false
    }
    return true
}

func clearImmutable(_ path: String) {
    _ = chattr("-i", path)
}

/// Whether `makeImmutable` works on this machine.
let canMakeImmutable: Bool = {
    guard let directory = try? makeTemporaryDirectory("chattr-probe") else { return false }
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let probe = directory + "/probe"
    guard FileManager.default.createFile(atPath: probe, contents: Data()), makeImmutable(probe) else { return false }
    clearImmutable(probe)
    return true
}()

private func isDirectory(_ path: String) -> Bool {
    var directory: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
}

private func chattr(_ flag: String, _ path: String) -> Bool {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr") else { return false }
    return SmallDisk.run("/usr/bin/chattr", [flag, path])
}

/// The files in a directory with their bytes: to show that a refused start created, removed and changed nothing.
func directorySnapshot(_ path: String) -> [String: Data] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    var files: [String: Data] = [:]
    for name in names where name != "daemon.log" {
        files[name] = FileManager.default.contents(atPath: path + "/" + name) ?? Data()
    }
    return files
}
