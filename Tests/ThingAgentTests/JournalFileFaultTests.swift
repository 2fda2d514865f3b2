import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The journal's own defences, on real files: reserved blocks, a file truncated or replaced under it, private modes.
@Suite("Journal file faults")
final class JournalFileFaultTests {
    let directory: String
    var path: String { directory + "/cache.sqlite.journal" }

    init() throws {
        directory = try makeTemporaryDirectory("journal-faults")
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func status(_ path: String) -> Glibc.stat {
        var info = Glibc.stat()
        _ = lstat(path, &info)
        return info
    }

    /// A journal that cannot be reserved on a full disk leaves no empty file behind (the next check would take it
    /// for a replaced journal, move it aside and try again, a new file every second); one that was there stays.
    @Test(.enabled(if: SmallDisk.isAvailable, "mounting a tmpfs needs root and a system that allows it; skipped"))
    func aJournalThatCannotBeMadeOnAFullDiskLeavesNoFile() throws {
        let disk = try SmallDisk(megabytes: 1)
        _ = try disk.fill()
        let made = disk.path + "/cache.sqlite.journal"
        #expect(throws: JournalError.self) { _ = try Journal(path: made, initialCapacity: 1 << 20) }
        #expect(access(made, F_OK) != 0, "an empty journal was left on the full disk")

        let existing = disk.path + "/existing.journal"
        #expect(close(open(existing, O_CREAT | O_WRONLY, 0o600)) == 0)
        #expect(throws: JournalError.self) { _ = try Journal(path: existing, initialCapacity: 1 << 20) }
        #expect(access(existing, F_OK) == 0, "a file the journal did not create is not removed")
    }

    /// Blocks allocated, not a sparse file: a write through the mapping can never find the disk without room.
    @Test func itsPagesAreReservedWhenSizedAndWhenGrown() throws {
        let journal = try Journal(path: path, initialCapacity: 1 << 20)
        #expect(Int(status(path).st_blocks) * 512 >= 1 << 20)
        let payload = [UInt8](repeating: 1, count: 200_000)
        for n in 0..<8 { try journal.append(topic: "t\(n)", payload: payload, arrival: Int64(n)) }
        #expect(status(path).st_size >= 1_600_000)
        #expect(Int(status(path).st_blocks) * 512 >= Int(status(path).st_size))
    }

    @Test func aTruncatedFileRefusesAppendsUntilResetMakesItWhole() throws {
        let journal = try Journal(path: path, initialCapacity: 1 << 20)
        try journal.append(topic: "before", payload: [1], arrival: 1)
        #expect(truncate(path, 0) == 0)
        #expect(journal.problem().map { "\($0)" }?.contains("truncated") == true)
        // Touching the mapping now would be SIGBUS: the append is refused, with an error naming the file.
        let error = #expect(throws: JournalError.self) {
            try journal.append(topic: "after", payload: [2], arrival: 2)
        }
        #expect(error?.description.contains(path) == true)
        #expect(journal.records(from: 0).isEmpty)
        try journal.reset(generation: journal.generation + 1)
        #expect(journal.problem() == nil)
        try journal.append(topic: "repaired", payload: [3], arrival: 3)
        #expect(try Journal(path: path).records(from: 0).map(\.record.topic) == ["repaired"])
    }

    @Test func aFileDeletedOrReplacedUnderItIsNoticed() throws {
        let journal = try Journal(path: path, initialCapacity: 1 << 20)
        #expect(journal.problem() == nil)
        #expect(unlink(path) == 0)
        #expect(journal.problem().map { "\($0)" }?.contains("deleted") == true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        #expect(journal.problem().map { "\($0)" }?.contains("replaced") == true)
    }

    /// The umask itself is process-wide, so it is left alone here; the daemon is tested under umask 000 in
    /// `StorageFaultTests.theDaemonsFilesArePrivateWhateverTheUmask`.
    @Test func itAndOtherFilesBesideTheCacheAreCreated0600() throws {
        _ = try Journal(path: path, initialCapacity: 1 << 20)
        #expect(status(path).st_mode & 0o777 == 0o600)
        let other = directory + "/lock"
        let fd = PrivateFiles.open(other, flags: O_RDWR)
        #expect(fd >= 0)
        close(fd)
        #expect(status(other).st_mode & 0o777 == 0o600)
    }
}
