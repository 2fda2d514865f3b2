import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

@Suite("Journal")
final class JournalTests {
    let directory: String
    var path: String { directory + "/cache.sqlite.journal" }

    init() throws {
        directory = try makeTemporaryDirectory("journal")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    @Test func recordsSurviveReopening() throws {
        do {
            let journal = try Journal(path: path)
            try journal.append(topic: "things/a/thing/properties", payload: Array("{\"x\":1}".utf8), arrival: 10)
            try journal.append(topic: "things/b/thing/status", payload: [], arrival: 11)
        }
        let reopened = try Journal(path: path)
        let records = reopened.records(from: 0).map(\.record)
        #expect(records == [
            Journal.Record(topic: "things/a/thing/properties", payload: Array("{\"x\":1}".utf8), arrival: 10),
            Journal.Record(topic: "things/b/thing/status", payload: [], arrival: 11),
        ])
        // New records go after the old ones.
        try reopened.append(topic: "t", payload: [1], arrival: 12)
        #expect(reopened.records(from: 0).count == 3)
    }

    @Test func replayStartsAtAnOffsetAndStopsAtATornRecord() throws {
        let journal = try Journal(path: path)
        for n in 0..<5 { try journal.append(topic: "t\(n)", payload: [UInt8(n)], arrival: Int64(n)) }
        let all = journal.records(from: 0)
        #expect(journal.records(from: all[1].end).map(\.record.topic) == ["t2", "t3", "t4"])

        // Corrupt one byte of the fourth record: replay keeps the first three only.
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64(all[2].end) + UInt64(Journal.recordHeaderSize))
        try handle.write(contentsOf: [0xFF])
        try handle.close()
        let reopened = try Journal(path: path)
        #expect(reopened.records(from: 0).map(\.record.topic) == ["t0", "t1", "t2"])
    }

    @Test func resetStartsAGenerationThatIgnoresOldBytes() throws {
        let journal = try Journal(path: path)
        for n in 0..<3 { try journal.append(topic: "old\(n)", payload: Array(repeating: 7, count: 100), arrival: 1) }
        try journal.reset(generation: journal.generation + 1)
        #expect(journal.records(from: 0).isEmpty)
        try journal.append(topic: "new", payload: [], arrival: 2)
        let reopened = try Journal(path: path)
        #expect(reopened.records(from: 0).map(\.record.topic) == ["new"])
    }

    @Test func growsPastItsInitialSize() throws {
        let journal = try Journal(path: path)
        let payload = [UInt8](repeating: 1, count: 200_000)
        let count = Journal.initialCapacity / payload.count + 10
        for n in 0..<count { try journal.append(topic: "t\(n)", payload: payload, arrival: Int64(n)) }
        let reopened = try Journal(path: path)
        #expect(reopened.records(from: 0).count == count)
    }

    @Test func anUnusableFileIsAClearError() throws {
        #expect(throws: JournalError.self) { try Journal(path: directory + "/missing/dir/x.journal") }
    }
}

@Suite("Journal and SQLite together")
struct JournalCompactionTests {
    @Test func compactionUnderLoadWritesWhatIsDirtyThenEmptiesTheJournal() throws {
        let directory = try makeTemporaryDirectory("compaction")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/cache.sqlite"
        let writer = CacheWriter(store: try CacheStore(path: path), journal: try Journal(path: path + ".journal"),
                                 cache: DeviceCache(), hub: EventHub())
        for n in 1...500 {
            let payload = Array("{\"time\":\(t0 + Int64(n)),\"data\":{\"n\":\(n)}}".utf8)
            let message = try payload.withUnsafeBytes {
                try PayloadDecoder().decode(.properties, payload: $0, arrival: t0)
            }
            _ = try writer.apply(message, to: "d\(n % 7)", now: t0, raw: ("things/d\(n % 7)/thing/properties", payload))
        }
        #expect(writer.hasDirty)
        try writer.compactJournal(threshold: 1000)
        #expect(!writer.hasDirty, "compaction writes what is dirty itself")
        let journal = try Journal(path: path + ".journal")
        #expect(journal.records(from: 0).isEmpty)
        let reader = try CacheReader(path: path)
        #expect(try reader.device("d3")?.properties["n"]?.value == .integer(btw(500, modulo: 7, residue: 3)))
        // Below the threshold nothing happens.
        try writer.compactJournal(threshold: 1 << 30)
        #expect(try Journal(path: path + ".journal").generation == journal.generation)
    }

    /// The largest n <= upper with n % modulo == residue.
    private func btw(_ upper: Int64, modulo: Int64, residue: Int64) -> Int64 {
        upper - ((upper - residue) % modulo + modulo) % modulo
    }
}

@Suite("Times that move without a value change")
struct TimeOnlyChangeTests {
    /// A repeated status with a newer time tells no listener anything, but its time must reach SQLite: otherwise,
    /// after a restart, a report older than it (and newer than the stored time) would win.
    @Test func aNewerRepeatOfTheStatusIsPersisted() throws {
        let directory = try makeTemporaryDirectory("time-only")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/cache.sqlite"
        let writer = CacheWriter(store: try CacheStore(path: path), journal: nil, cache: DeviceCache(), hub: EventHub())
        #expect(try writer.apply(.status(online: true, time: t0), to: "d1", now: t0) != .unchanged)
        #expect(try writer.apply(.status(online: true, time: t0 + 500), to: "d1", now: t0) == .unchanged)
        #expect(writer.hasDirty, "the moved time is marked for SQLite")
        try writer.flush()
        #expect(try CacheReader(path: path).device("d1")?.statusTime == t0 + 500)
    }
}
