import Foundation
import Testing
import TestSupport

/// The DocC catalogs of ThingAgent, MQTT and SQLite as `scripts/docs` builds them with the toolchain's `docc`:
/// every symbol link resolves, and a link to a symbol that does not exist fails the script, naming it.
@Suite("DocC catalogs", .timeLimit(.minutes(20)))
struct DocCTests {
    static let root = repositoryRoot()
    static let script = root + "/scripts/docs"

    /// What docc says of a link it cannot follow.
    static let unresolvedMarks = ["doesn't exist at", "can't be resolved", "cannot be resolved", "is ambiguous at"]

    static func unresolvedLines(_ output: String) -> [Substring] {
        output.split(separator: "\n").filter { line in unresolvedMarks.contains { line.contains($0) } }
    }

    /// The full run: a debug build in `.build/docs` for the symbol graphs (about 90 s from cold on two cores,
    /// more while the rest of the suite runs), then the three catalogs. Run once; the check of a broken catalog
    /// converts against the graphs it left.
    static let fullRun = Task {
        try await runCommand("/bin/bash", [script], timeout: .seconds(15 * 60), directory: root)
    }

    @Test func everyCatalogConvertsWithEveryLinkResolved() async throws {
        let result = try await Self.fullRun.value
        let output = result.stdout + result.stderr
        #expect(result.status == 0, "scripts/docs failed:\n\(output)")
        #expect(Self.unresolvedLines(output).isEmpty, "unresolved links:\n\(Self.unresolvedLines(output).joined(separator: "\n"))")
        for module in ["ThingAgent", "MQTT", "SQLite"] {
            let archive = Self.root + "/.build/docs/\(module).doccarchive"
            #expect(result.stdout.contains(archive), "scripts/docs does not say where \(module)'s archive is")
            // The landing page is the catalog's, with its curated topics (docc reads no pages from a directory
            // whose name does not end in .docc, and then makes a landing page of its own).
            let landing = archive + "/data/documentation/\(module.lowercased()).json"
            let page = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: landing)))
            let groups = ((page as? [String: Any])?["topicSections"] as? [[String: Any]] ?? []).compactMap {
                $0["title"] as? String
            }
            let curated = ["ThingAgent": "Essentials", "MQTT": "The client", "SQLite": "Connections"][module]!
            #expect(groups.contains(curated), "\(landing): topic groups \(groups), no '\(curated)'")
        }
        let article = Self.root + "/.build/docs/ThingAgent.doccarchive/data/documentation/thingagent/embeddingthingagent.json"
        #expect(FileManager.default.fileExists(atPath: article))
    }

    @Test func aLinkToNoSymbolFailsTheScript() async throws {
        _ = try await Self.fullRun.value  // its symbol graphs; whether it passed is the other test's to say
        let directory = try makeTemporaryDirectory("thing-agent-docc")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let catalog = directory + "/ThingAgent.docc"
        try FileManager.default.copyItem(atPath: Self.root + "/Sources/ThingAgent/ThingAgent.docc", toPath: catalog)
        try """
            # A broken page

            The agent keeps ``NoSuchSymbolAnywhere`` current, beside ``Agent``.

            """.write(toFile: catalog + "/BrokenPage.md", atomically: true, encoding: .utf8)

        let result = try await runCommand("/bin/bash", [Self.script, "--no-build", "--catalog", catalog,
                                                        "--module", "ThingAgent"],
                                          timeout: .seconds(5 * 60), directory: Self.root)
        let output = result.stdout + result.stderr
        #expect(result.status != 0, "a link to no symbol passed:\n\(output)")
        #expect(output.contains("NoSuchSymbolAnywhere"), "\(output)")
        // That link alone: the rest of the copied catalog resolves.
        let unresolved = Self.unresolvedLines(output)
        #expect(!unresolved.isEmpty)
        #expect(unresolved.allSatisfy { $0.contains("NoSuchSymbolAnywhere") }, "\(unresolved.joined(separator: "\n"))")
        #expect(!output.contains("symbol graphs built"), "--no-build built:\n\(output)")
    }
}
