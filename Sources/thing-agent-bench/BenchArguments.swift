import Foundation

/// The bench's command line: checked before anything starts, so that a mistyped flag or section says so instead of
/// running the whole table (minutes) or, with an unknown `--only`, nothing.
enum BenchArguments {
    static let sections = ["ingest", "daemon", "homeAssistant", "stop", "latency", "set", "link", "json", "cache"]

    static let usage = """
        usage: thing-agent-bench [--quick] [--only SECTION] [--rounds N]
               thing-agent-bench --receive-path [--count N] [--memory-only]
               thing-agent-bench --scrape [--count N]
               thing-agent-bench --make-cache N CACHE
               thing-agent-bench --info-process N CACHE EXECUTABLE...
               thing-agent-bench --versus-sqlite N CACHE EXECUTABLE... [--quick]

        Every benchmark of thing-agent, against a broker of its own; figures printed as a table.
        Build in release first: swift build -c release --product thing-agent-bench --product thing-agent

          --quick          smaller runs (a check that the bench works, not figures to quote)
          --only SECTION   one part: \(sections.joined(separator: ", "))
          --rounds N       alternated pairs per in-process ingest ratio (default 3, 1 with --quick)
          --receive-path   the receive path alone, no broker (also under valgrind)
          --scrape         what a metrics scrape costs the receive path
          --count N        messages for --receive-path and --scrape (default 200000)
          --memory-only    --receive-path without the SQLite cache
          --make-cache     write a cache of N devices for the two below
          --info-process   the whole `info` process of each executable over that cache
          --versus-sqlite  `info` and `devices` beside sqlite3 answering the same
          -h, --help       this text

        docs/performance.md says what each figure means and the figures of the last full run.
        """

    /// Modes that take their own positional arguments (checked where they are read).
    private static let modes: Set<String> = ["--load-probe", "--make-cache", "--info-process", "--versus-sqlite"]

    /// What the command line asks for (outside the modes, which read their own positional arguments).
    struct Options {
        var quick = false
        var only: String?
        var rounds: Int?
        var count: Int?
        var receivePath = false
        var scrape = false
        var memoryOnly = false
    }

    /// The command line read once: exits with the usage on `--help`, or with a one-line error and status 2 on a
    /// flag or value it does not know.
    static func parse(_ arguments: [String]) -> Options {
        let rest = Array(arguments.dropFirst())
        if rest.contains("--help") || rest.contains("-h") {
            print(usage)
            exit(0)
        }
        var options = Options()
        if rest.contains(where: modes.contains) { return options }
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            switch argument {
            case "--quick": options.quick = true
            case "--receive-path": options.receivePath = true
            case "--scrape": options.scrape = true
            case "--memory-only": options.memoryOnly = true
            case "--only", "--rounds", "--count":
                guard index + 1 < rest.count else { fail("\(argument) needs a value") }
                let value = rest[index + 1]
                index += 1
                if argument == "--only" {
                    guard sections.contains(value) else {
                        fail("no section \"\(value)\"; the sections: \(sections.joined(separator: ", "))")
                    }
                    options.only = value
                    break
                }
                guard let number = Int(value), number >= 1 else {
                    fail("\(argument) takes a whole number above 0, not \"\(value)\"")
                }
                if argument == "--rounds" { options.rounds = number } else { options.count = number }
            default:
                fail("unknown argument \"\(argument)\" (see --help)")
            }
            index += 1
        }
        return options
    }

    private static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("thing-agent-bench: \(message)\n".utf8))
        exit(2)
    }
}
