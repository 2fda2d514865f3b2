import Foundation
import Testing
import TestSupport

/// The bench as its users run it: its command line, and one part that needs no broker, run for real (the figures
/// are not checked here: a test asserts no speed).
@Suite("thing-agent-bench: its command line, and the receive path measured")
struct BenchCommandTests {
    static let bench = productsDirectory().appendingPathComponent("thing-agent-bench").path

    @Test("--help lists every section and exits 0")
    func help() async throws {
        let result = try await runCommand(Self.bench, ["--help"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("usage: thing-agent-bench"))
        for section in ["ingest", "daemon", "homeAssistant", "stop", "latency", "set", "link", "json", "cache"] {
            #expect(result.stdout.contains(section), "\(section) missing from: \(result.stdout)")
        }
    }

    @Test("an unknown flag, section or count is an error naming it, before anything runs", arguments: [
        (["--bogus"], "unknown argument \"--bogus\""),
        (["--only", "ingestt"], "no section \"ingestt\""),
        (["--only"], "--only needs a value"),
        (["--rounds", "0"], "--rounds takes a whole number above 0"),
        (["--quick", "--rounds", "three"], "not \"three\""),
    ])
    func badArguments(arguments: [String], message: String) async throws {
        let result = try await runCommand(Self.bench, arguments, timeout: .seconds(10))
        #expect(result.status == 2, "\(arguments): \(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        #expect(result.stdout.isEmpty, "it started: \(result.stdout)")
    }

    @Test("--receive-path measures the receive path with and without the SQLite cache and prints both rows")
    func receivePath() async throws {
        let result = try await runCommand(Self.bench, ["--receive-path", "--count", "2000"], timeout: .seconds(120))
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let rows = result.stdout.split(separator: "\n").filter { $0.hasPrefix("|") && $0.contains("µs/msg") }
        #expect(rows.count == 2, "\(result.stdout)")
        #expect(rows.contains { $0.contains("cached to SQLite") } && rows.contains { $0.contains("memory only") })
    }
}
