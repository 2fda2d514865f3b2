import Foundation
import Glibc
import Platform
import Synchronization
import Testing
import TestSupport

/// What the shipped modules use instead of Foundation's whole library: the same answers Foundation gave.
@Suite("Platform")
struct PlatformTests {
    @Test("fixed(_:) writes what %.Nf writes")
    func fixedPoint() {
        for (value, decimals) in [(0.0, 1), (2.35, 1), (-0.06, 1), (-1.4, 0), (1234.5678, 3), (0.0006, 3), (99.96, 1),
                                  (1e-9, 2), (-12.519, 2), (3.0, 0), (12.0, 3), (0.001, 3), (86_400.26, 1)] {
            #expect(value.fixed(decimals) == String(format: "%.\(decimals)f", value), "\(value) to \(decimals) decimals")
        }
        // Exact binary halves round away from zero (glibc's printf rounds them to even), and there is no "-0.0";
        // no figure the agent prints depends on either.
        #expect((-0.04).fixed(1) == "0.0")
        #expect(2.5.fixed(0) == "3")
        #expect((-2.5).fixed(0) == "-3")
        #expect(0.25.fixed(1) == "0.3")
        #expect(Double.infinity.fixed(1) == "inf")
        #expect(1e300.fixed(1) == "\(1e300)")
    }

    @Test("shortest writes a whole number without a point, others as Swift prints them")
    func shortestNumber() {
        #expect(30.0.shortest == "30")
        #expect((-2.0).shortest == "-2")
        #expect(2.5.shortest == "2.5")
        #expect(0.0.shortest == "0")
    }

    @Test("hex(width:) pads with zeros as %02x does")
    func hexadecimal() {
        #expect(UInt8(0x0a).hex(width: 2) == "0a")
        #expect(UInt8(0xff).hex(width: 2) == "ff")
        #expect(UInt64(0x1234).hex(width: 2) == "1234")
        #expect(UInt64(0).hex(width: 2) == "00")
    }

    @Test("trimmingBlanks matches Foundation's trimming of whitespace")
    func blanks() {
        for text in ["", "  ", " a ", "\ta b\t ", "abc", " x"] {
            #expect(text.trimmingBlanks() == text.trimmingCharacters(in: .whitespaces), "\(text.debugDescription)")
        }
    }

    @Test("readWholeFile reads a file and a /proc file to the end, and says why it cannot")
    func wholeFiles() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/big"
        let bytes = (0..<200_000).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try readWholeFile(path) == bytes)
        // /proc files read as size 0: the reader goes on until the end all the same.
        #expect(String(decoding: try readWholeFile("/proc/self/status"), as: UTF8.self).contains("Name:"))
        #expect(throws: SystemError.self) { try readWholeFile(directory + "/missing") }
        do {
            _ = try readWholeFile(directory + "/missing")
        } catch {
            #expect(error.code == ENOENT)
            #expect("\(error)" == "No such file or directory")
        }
    }

    @Test("writeAll writes everything, and says false when the reader has gone")
    func writesAll() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let text = String(repeating: "x", count: 30_000) + "end"
        let reader = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        startDetachedThread(name: "pipe-reader") { [read = ends[0]] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = chunk.withUnsafeMutableBytes { Glibc.read(read, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                reader.withLock { $0.append(contentsOf: chunk[..<count]) }
            }
            done.signal()
        }
        #expect(writeAll(text, to: ends[1]))
        close(ends[1])
        done.wait()
        close(ends[0])
        #expect(reader.withLock { String(decoding: $0, as: UTF8.self) } == text)
        // A closed reader: EPIPE (SIGPIPE is ignored here, as the agent ignores it).
        #expect(pipe(&ends) == 0)
        close(ends[0])
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        #expect(writeAll("lost", to: ends[1]) == false)
        close(ends[1])
    }

    @Test("a detached thread runs its body under its name")
    func detachedThread() {
        let name = Mutex<String>("")
        let done = DispatchSemaphore(value: 0)
        startDetachedThread(name: "a-name-longer-than-fifteen") {
            let comm = (try? readWholeFile("/proc/thread-self/comm")).map { String(decoding: $0, as: UTF8.self) } ?? ""
            name.withLock { $0 = comm.trimmingCharacters(in: .newlines) }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(name.withLock { $0 } == "a-name-longer-t")
    }

    /// Foundation's whole library brings ICU and its start-up cost into every process: a third of a short command's
    /// time (docs/performance.md). The shipped modules import FoundationEssentials; only the bench may import more.
    @Test("no shipped module imports Foundation's whole library")
    func shippedModulesImportFoundationEssentials() throws {
        let sources = TestSupport.repositoryRoot() + "/Sources"
        let files = FileManager.default.enumerator(atPath: sources)?.compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") && !$0.hasPrefix("thing-agent-bench/") } ?? []
        #expect(files.count > 100)
        for file in files {
            let text = try String(contentsOfFile: sources + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.contains(" import ") {
                let module = line.split(separator: " ").last.map(String.init) ?? ""
                #expect(!["Foundation", "FoundationInternationalization", "FoundationNetworking", "FoundationXML"]
                    .contains(module) && !module.hasPrefix("Foundation."), "\(file): \(line)")
            }
        }
    }
}
