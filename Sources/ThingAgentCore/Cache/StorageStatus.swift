import JSON

/// Whether the daemon can keep what it receives: the files it writes (the cache, its journal) and what is wrong
/// with them. `Agent.storage` gives the live value; the daemon also keeps it in `<database>.storage` for
/// `thing-agent stats` (that file is written in place, so it stays current on a full disk).
public struct StorageStatus: Sendable, Equatable {
    public struct Problem: Sendable, Equatable {
        /// The file that fails.
        public var file: String
        /// What failed and why, e.g. "cannot grow the journal /var/lib/x.journal: No space left on device".
        public var error: String
        /// Agent time (ms) from which it failed.
        public var since: Millis
        /// While it lasts, new messages are left with the broker: the receive path cannot keep them, so it takes
        /// none (the broker sends them again once the agent takes messages again).
        public var holdsIntake: Bool
    }

    /// One per failing file, sorted by file.
    public var problems: [Problem] = []

    public init(problems: [Problem] = []) {
        self.problems = problems
    }

    public var isHealthy: Bool { problems.isEmpty }
    public var holdsIntake: Bool { problems.contains { $0.holdsIntake } }

    /// "ok"; "degraded" (a file fails, messages are still taken: the journal or memory keeps them); "holding"
    /// (messages are left with the broker until the files work again).
    public var state: String { isHealthy ? "ok" : holdsIntake ? "holding" : "degraded" }

    public var json: JSONValue {
        .object(JSONObject([
            ("state", .string(state)),
            ("problems", .array(problems.map { problem in
                .object(JSONObject([
                    ("file", .string(problem.file)), ("error", .string(problem.error)),
                    ("since", .integer(problem.since)), ("holdsIntake", .bool(problem.holdsIntake)),
                ]))
            })),
        ]))
    }

    public init?(json: JSONValue) {
        guard let problems = json["problems"]?.arrayValue else { return nil }
        self.problems = problems.compactMap { value in
            guard let file = value["file"]?.stringValue, let error = value["error"]?.stringValue else { return nil }
            return Problem(file: file, error: error, since: value["since"]?.int64Value ?? 0,
                           holdsIntake: value["holdsIntake"]?.boolValue ?? false)
        }
    }
}

extension StorageStatus {
    /// The status the daemon that runs (or last ran) on the cache file `database` wrote; nil when none did.
    /// A daemon that was killed leaves the status it last had; every start writes a new one.
    public static func lastWritten(forCache database: String) -> StorageStatus? {
        StorageStatusFile.read(path: database + ".storage")
    }
}
