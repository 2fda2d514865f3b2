import Testing
@testable import thing_agent

@Suite("Tables as the CLI prints them")
struct FormatTableTests {
    /// Each name with the terminal columns it takes: CJK characters and emoji two each, a combining accent and a
    /// zero-width space none.
    static let names: [(name: String, columns: Int)] = [
        ("Lamp 💡", 7), ("客厅灯", 6), ("💡 lamp", 7), ("Küche", 5), ("e\u{301}clair", 6), ("plain", 5),
        ("a\u{200B}b", 2), ("❤️ heart", 8),
    ]

    @Test("columns line up in terminal columns and no cell is cut, whatever the characters in it (CJK, emoji)")
    func columnsLineUpAndNothingIsCut() {
        let names = Self.names
        let table = Format.table(["ID", "NAME", "STATUS"], names.enumerated().map { ["d\($0.offset)", $0.element.name, "online"] })
        let lines = table.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 1 + names.count)
        // The NAME column is as wide as its widest name on a terminal; STATUS starts after it and two spaces.
        let nameColumn = names.map(\.columns).max()!
        #expect(lines.first == "ID  NAME" + String(repeating: " ", count: nameColumn - 4 + 2) + "STATUS")
        for (index, (line, entry)) in zip(lines.dropFirst(), names).enumerated() {
            let padding = String(repeating: " ", count: nameColumn - entry.columns + 2)
            #expect(line == "d\(index)  " + entry.name + padding + "online", "aligned, the name whole: \(line)")
        }
    }
}
