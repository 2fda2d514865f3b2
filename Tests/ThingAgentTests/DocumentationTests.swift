import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The README and docs/ as a reader follows them: every relative link leads to a file that exists and, with an
/// anchor, to a heading in it; every configuration key has its one row in docs/configuration.md and no other.
@Suite("Documentation")
struct DocumentationTests {
    static let root = repositoryRoot

    /// README.md, CHANGELOG.md and every page of docs/.
    static func pages() throws -> [String] {
        let docs = try FileManager.default.contentsOfDirectory(atPath: root + "/docs").filter { $0.hasSuffix(".md") }
        return ["README.md", "CHANGELOG.md"] + docs.sorted().map { "docs/" + $0 }
    }

    static func read(_ page: String) throws -> String {
        try String(contentsOfFile: root + "/" + page, encoding: .utf8)
    }

    /// The text outside fenced code blocks (links and table rows there are examples, not the document's own).
    static func prose(_ text: String) -> [Substring] {
        var inFence = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                inFence.toggle()
                return false
            }
            return !inFence
        }
    }

    /// GitHub's anchor for a heading: lower case, spaces to '-', punctuation other than '-' and '_' dropped.
    static func anchor(_ heading: Substring) -> String {
        String(heading.lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
            return nil
        })
    }

    static func anchors(_ page: String) throws -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors = Set<String>()
        for line in prose(try read(page)) where line.hasPrefix("#") {
            let heading = line.drop { $0 == "#" }.drop { $0 == " " }
            let base = anchor(heading)
            let count = seen[base, default: 0]
            seen[base] = count + 1
            anchors.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return anchors
    }

    @Test func everyRelativeLinkResolves() throws {
        var checked = 0
        for page in try Self.pages() {
            let directory = URL(fileURLWithPath: Self.root + "/" + page).deletingLastPathComponent()
            for line in Self.prose(try Self.read(page)) {
                for match in line.matches(of: /\]\(([^)\s]+)\)/) {
                    let target = String(match.1)
                    if target.contains("://") || target.hasPrefix("mailto:") { continue }
                    checked += 1
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    let file = parts[0].isEmpty ? URL(fileURLWithPath: Self.root + "/" + page)
                        : directory.appendingPathComponent(String(parts[0])).standardized
                    #expect(FileManager.default.fileExists(atPath: file.path), "\(page): \(target): no such file")
                    guard parts.count == 2, file.pathExtension == "md",
                          FileManager.default.fileExists(atPath: file.path) else { continue }
                    let relative = String(file.path.dropFirst(Self.root.count + 1))
                    #expect(try Self.anchors(relative).contains(String(parts[1])),
                            "\(page): \(target): no such heading in \(relative)")
                }
            }
        }
        #expect(checked > 100, "the check found only \(checked) links: it is not reading the pages")
    }

    /// A key's row: a table row whose first cell is the key in backticks.
    @Test func everyConfigurationKeyHasOneRowInTheConfigurationPage() throws {
        var rows: [String: [String]] = [:]
        for page in try Self.pages() {
            for line in Self.prose(try Self.read(page)) where line.hasPrefix("|") {
                let first = line.split(separator: "|", omittingEmptySubsequences: true).first?
                    .trimmingCharacters(in: .whitespaces) ?? ""
                guard first.hasPrefix("`"), first.hasSuffix("`"), first.count > 2 else { continue }
                rows[String(first.dropFirst().dropLast()), default: []].append(page)
            }
        }
        for (key, variable) in AgentConfiguration.environmentVariables {
            #expect(rows[key] == ["docs/configuration.md"], "\(key): rows in \(rows[key] ?? [])")
            let page = try Self.read("docs/configuration.md")
            #expect(page.contains("`\(variable)`"), "\(key): its variable \(variable) is not documented")
        }
    }

    /// The README stays a front door: the two commands first, and short.
    @Test func theReadmeIsShortAndStartsWithTheTwoCommands() throws {
        let readme = try Self.read("README.md")
        let words = readme.split { $0.isWhitespace }.count
        #expect(words <= 1_600, "README.md has \(words) words")
        let block = try #require(readme.firstMatch(of: /```sh\n([^`]*)```/)?.1)
        #expect(block.split(separator: "\n").map { $0.split(separator: " ").first } == ["scripts/run", "scripts/test"])
    }
}
