import Foundation
import Testing
import TestSupport
@testable import thing_agent

/// The shell completions and the man page, made from the commands' own help, as the shells and man read them.
@Suite("Completion and man page")
struct CompletionAndManPageTests {
    /// What bash offers for the words typed so far (the last one being completed).
    static func bashOffers(_ words: [String], in directory: String? = nil) async throws -> [String] {
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let script = """
            source <('\(thingAgentExecutable())' completion bash)
            COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _thing_agent; printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try await runCommand("/bin/bash", ["-c", script], directory: directory)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    @Test func bashCompletesCommandsOptionsActionsAndFiles() async throws {
        #expect(try await Self.bashOffers(["thing-agent", "sc"]) == ["scene"])
        #expect(try await Self.bashOffers(["thing-agent", "devices", "--ro"]) == ["--room"])
        #expect(try await Self.bashOffers(["thing-agent", "simulate", "--dialect"]) == ["--dialect", "--dialects"])
        #expect(try await Self.bashOffers(["thing-agent", "scene", ""]) == ["list", "run", "create", "update", "delete"])
        #expect(try await Self.bashOffers(["thing-agent", "completion", ""]) == ["bash", "zsh"])
        // A value that is not a file is left to the user; a FILE is a file name.
        #expect(try await Self.bashOffers(["thing-agent", "devices", "--room", ""]).isEmpty)
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(FileManager.default.createFile(atPath: directory + "/agent.json", contents: Data("{}".utf8)))
        #expect(try await Self.bashOffers(["thing-agent", "run", "--config", "ag"], in: directory) == ["agent.json"])
    }

    @Test func zshReadsItsCompletion() async throws {
        let file = try makeTemporaryDirectory() + "/_thing-agent"
        let script = try await runCommand(thingAgentExecutable(), ["completion", "zsh"])
        try script.stdout.write(toFile: file, atomically: true, encoding: .utf8)
        let check = try await runCommand("/usr/bin/zsh", ["-n", file])
        #expect(check.status == 0, "\(check.stderr)")
        #expect(script.stdout.hasPrefix("#compdef thing-agent\n"))
        #expect(script.stdout.contains("'--room[only the devices in room R"))
        #expect(try await runCommand(thingAgentExecutable(), ["completion", "fish"]).status == 2)
    }

    /// The help texts the completions and the man page are made from: no stray blank lines, and a short request's
    /// time is "<1 ms", never "0 ms".
    @Test func helpTextsHaveNoStrayBlankLines() async throws {
        for command in CommandList.all {
            #expect(!command.spec.help.contains("\n\n\n"), "\(command.spec.name) --help has a double blank line")
        }
        #expect(Format.milliseconds(0) == "<1 ms")
        #expect(Format.milliseconds(12) == "12 ms")
    }

    @Test func theManPageRendersWithoutWarningsAndNamesEveryCommand() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let page = try await runCommand(thingAgentExecutable(), ["manpage"])
        #expect(page.status == 0)
        try page.stdout.write(toFile: directory + "/thing-agent.1", atomically: true, encoding: .utf8)
        let groff = try await runCommand("/usr/bin/groff", ["-man", "-ww", "-z", directory + "/thing-agent.1"])
        #expect(groff.status == 0 && groff.stderr.isEmpty, "\(groff.stderr)")
        let help = try await runCommand(thingAgentExecutable(), ["--help"])
        let commands = help.stdout.split(separator: "\n", omittingEmptySubsequences: false).drop { $0 != "Commands:" }.dropFirst()
            .prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.count > 20)
        let rendered = try await runCommand("/usr/bin/man", ["-l", directory + "/thing-agent.1"],
                                            environment: ["MANWIDTH": "100", "MAN_KEEP_FORMATTING": ""])
        for command in commands {
            #expect(rendered.stdout.contains("\n   \(command)\n"), "no section for \(command)")
        }
        #expect(rendered.stdout.contains("THING_AGENT_BROKER"))
        #expect(rendered.stdout.contains("--room R"))
    }
}
