import Testing
@testable import thing_agent

@Suite("Tables as the CLI prints them")
struct FormatTableTests {
    @Test("columns line up by characters and no cell is cut, whatever the characters in it")
    func columnsLineUpAndNothingIsCut() {
        let names = ["Lamp 💡", "Küche", "e\u{301}clair", "plain"]
        let table = Format.table(["ID", "NAME", "STATUS"], names.enumerated().map { ["d\($0.offset)", $0.element, "online"] })
        let lines = table.split(separator: "\n").map(String.init)
        #expect(lines.count == 1 + names.count)
        // Every line's STATUS column starts at the same character: ID (2) + 2 spaces, the longest name + 2 spaces.
        let statusColumn = 2 + 2 + names.map(\.count).max()! + 2
        for (line, name) in zip(lines.dropFirst(), names) {
            #expect(line.contains(name), "the name is printed whole: \(line)")
            #expect(String(line.dropFirst(statusColumn)) == "online", "aligned: \(line)")
        }
        #expect(String(lines[0].dropFirst(statusColumn)) == "STATUS")
    }
}
