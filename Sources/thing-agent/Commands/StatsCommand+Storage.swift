import JSON
import ThingAgent

/// The storage part of `thing-agent stats`: what the daemon wrote into `<database>.storage` (kept current on a
/// full disk, when the counters in the cache file cannot be).
extension StatsCommand {
    static func storage(of database: String) -> StorageStatus? {
        StorageStatus.lastWritten(forCache: database)
    }

    static func printStorage(_ status: StorageStatus?) {
        guard let status else { return }
        switch status.state {
        case "ok": Console.out("Storage: ok")
        case "holding": Console.out("Storage: holding (new messages are left with the broker until the files work again)")
        default: Console.out("Storage: degraded (messages are still taken; the journal keeps them)")
        }
        for problem in status.problems {
            Console.out("  \(problem.file): \(problem.error) (since \(Format.date(problem.since)))")
        }
    }
}
