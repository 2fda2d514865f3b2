import Foundation
import Testing
import TestSupport
import ThingAgent

/// The files that ship, loaded by the programs that read them: the unit by systemd-analyze, the packaged
/// configuration by the agent; the version and help as the CLI prints them; the documentation's links.
@Suite("shipped files, version and documentation")
struct ShippedFilesTests {
    static let root = repositoryRoot()

    @Test func versionIsPrintedFromTheOnePlaceItIsWritten() async throws {
        for arguments in [["--version"], ["version"]] {
            let result = try await runCommand(thingAgentExecutable(), arguments)
            #expect(result.status == 0)
            #expect(result.stdout == "thing-agent \(ThingAgentVersion.current)\n", "\(arguments): \(result.stdout)")
        }
        let package = try String(contentsOfFile: Self.root + "/scripts/package", encoding: .utf8)
        #expect(package.contains("Version.swift"), "scripts/package reads the version from Version.swift")
    }

    @Test func helpCommandPrintsThatCommandsHelp() async throws {
        for command in ["run", "info", "set", "transfer", "version"] {
            let help = try await runCommand(thingAgentExecutable(), ["help", command])
            let flag = try await runCommand(thingAgentExecutable(), [command, "--help"])
            #expect(help.status == 0)
            #expect(help.stdout == flag.stdout, "help \(command)")
            #expect(help.stdout.contains("thing-agent \(command)"))
        }
        let unknown = try await runCommand(thingAgentExecutable(), ["help", "nosuch"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("unknown command 'nosuch'"))
    }

    @Test func thePackagedConfigurationLoadsAndNamesOnlyAbsolutePaths() throws {
        var configuration = AgentConfiguration()
        try configuration.apply(file: Self.root + "/deploy/agent.json")
        try configuration.checkCombinations()
        #expect(configuration.cache.database == "/var/lib/thing-agent/cache.sqlite")
        let paths = [configuration.cache.database, configuration.modelsDirectory, configuration.scenesFile,
                     configuration.detailConfig, configuration.firmwareCatalog]
        for path in paths {
            let path = try #require(path)
            #expect(path.hasPrefix("/"), "\(path) is relative")
        }
        #expect(configuration.modelsDirectory == "/etc/thing-agent/models")
        #expect(configuration.logFormat == .json)
    }

    @Test func theUnitIsANotifyServiceThatSystemdAnalyzeAccepts() async throws {
        let unit = try String(contentsOfFile: Self.root + "/deploy/thing-agent.service", encoding: .utf8)
        let lines = Set(unit.split(separator: "\n").map(String.init))
        for expected in ["Type=notify", "ExecStart=/usr/bin/thing-agent run", "RestartPreventExitStatus=2 6",
                         "ExecReload=/bin/kill -HUP $MAINPID"] {
            #expect(lines.contains(expected), "the unit lacks \(expected)")
        }
        #expect(lines.contains { $0.hasPrefix("WatchdogSec=") })
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            Issue.record("systemd-analyze is missing: install the systemd package (scripts/install-deps does)")
            return
        }
        let verified = try await ShippedUnit.verify(unitFile: Self.root + "/deploy/thing-agent.service",
                                                    binary: thingAgentExecutable())
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        #expect(verified.stderr.isEmpty && verified.stdout.isEmpty, "warnings: \(verified.stdout)\(verified.stderr)")

        // It does find faults: a unit with a bad type is reported.
        let broken = try makeTemporaryDirectory("broken-unit") + "/thing-agent.service"
        try unit.replacingOccurrences(of: "Type=notify", with: "Type=notifyy")
            .write(toFile: broken, atomically: true, encoding: .utf8)
        let faulty = try await ShippedUnit.verify(unitFile: broken, binary: thingAgentExecutable())
        #expect(faulty.stderr.contains("Failed to parse service type"), "\(faulty.stderr)")
    }

    @Test func everyRelativeLinkInTheDocumentationResolvesInsideTheRepository() throws {
        let docs = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/docs")
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        var checked = 0
        for file in ["README.md"] + docs {
            let text = try String(contentsOfFile: Self.root + "/" + file, encoding: .utf8)
            for target in MarkdownLinks.targets(in: text) where MarkdownLinks.isRelative(target) {
                let path = String(target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0])
                guard !path.isEmpty else { continue }
                let base = URL(fileURLWithPath: Self.root + "/" + file).deletingLastPathComponent()
                let resolved = base.appendingPathComponent(path).standardizedFileURL.path
                #expect(resolved.hasPrefix(Self.root + "/"), "\(file): \(target) leaves the repository")
                #expect(FileManager.default.fileExists(atPath: resolved), "\(file): \(target) does not exist")
                checked += 1
            }
        }
        #expect(checked > 5, "the README and docs link each other")
        #expect(MarkdownLinks.targets(in: "see [x](../shared/docs/protocol.md) and [y](docs/a.md#b)")
                == ["../shared/docs/protocol.md", "docs/a.md#b"])
    }
}

/// `systemd-analyze verify` on a unit whose ExecStart names /usr/bin/thing-agent: run in a private mount namespace
/// where an overlay adds the built binary to /usr/bin (the host's /usr/bin is untouched).
enum ShippedUnit {
    static func verify(unitFile: String, binary: String) async throws -> ProcessResult {
        let overlay = try makeTemporaryDirectory("unit-bin")
        defer { try? FileManager.default.removeItem(atPath: overlay) }
        try FileManager.default.copyItem(atPath: binary, toPath: overlay + "/thing-agent")
        let script = """
            mount -t overlay overlay -o lowerdir=\(overlay):/usr/bin /usr/bin || exit 90
            exec systemd-analyze verify \(unitFile)
            """
        let result = try await runCommand("/usr/bin/unshare", ["-m", "/bin/sh", "-c", script], timeout: .seconds(60))
        if result.status == 90 { throw TestSupportError("cannot mount an overlay on /usr/bin: \(result.stderr)") }
        return result
    }
}

/// Inline links `[text](target)` of a Markdown text, outside code spans and fenced blocks.
enum MarkdownLinks {
    static func targets(in text: String) -> [String] {
        var targets: [String] = []
        var fenced = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle() }
            if fenced { continue }
            var inCode = false
            var index = line.startIndex
            while index < line.endIndex {
                let character = line[index]
                if character == "`" { inCode.toggle() }
                if !inCode, character == "]", line[line.index(after: index)...].hasPrefix("("),
                   let close = line[index...].firstIndex(of: ")") {
                    let start = line.index(index, offsetBy: 2)
                    if start <= close { targets.append(String(line[start..<close])) }
                    index = close
                }
                index = line.index(after: index)
            }
        }
        return targets
    }

    static func isRelative(_ target: String) -> Bool {
        !(target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:")
          || target.hasPrefix("#") || target.hasPrefix("/") || target.hasPrefix("file:"))
    }
}
