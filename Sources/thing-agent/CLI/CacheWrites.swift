import FoundationEssentials
import JSON
import ThingAgent

/// Who may write the cache file for a command: the daemon that holds its lock (the command sends its write to the
/// daemon's API), or the command itself, holding the lock until it is done.
enum CacheWriteAccess {
    case daemon(clientID: String)
    case here(CacheLock)

    /// Finds out who writes the cache: a daemon holding the lock names itself in the lock file; another command
    /// holding it (`command` is this one's name, written into the file while it holds it) is waited for, a few
    /// seconds at most, and then named in the error.
    static func find(_ configuration: AgentConfiguration, command: String) async throws -> CacheWriteAccess {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5)
        while true {
            do {
                return .here(try CacheLock(cache: configuration.cache.database, holder: .command(command)))
            } catch let held as CacheLock.Held {
                // In a group, the group's active instance answers, whichever host it is on.
                if let owner = held.owner { return .daemon(clientID: configuration.group.name ?? owner) }
                if clock.now >= deadline {
                    // Still no pid of the holder's own in the file: a daemon whose pids this process cannot see.
                    if case .daemon(let clientID)? = held.written, held.heldBy == nil {
                        return .daemon(clientID: configuration.group.name ?? clientID)
                    }
                    throw CommandFailure(code: .failure, message: held.description)
                }
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                throw CommandFailure(code: .failure, message: "\(error)")
            }
        }
    }
}

extension Command {
    /// `--timeout S` for commands that may wait for the daemon's answer.
    static var daemonTimeoutOption: OptionSpec {
        OptionSpec(name: "timeout", valueName: "S", help: "seconds to wait for the daemon's answer (default 10)")
    }

    /// Who writes the cache (`CacheWriteAccess.find`), for a cache file that must exist already.
    static func writeAccess(_ configuration: AgentConfiguration) async throws -> CacheWriteAccess {
        _ = try openExisting(configuration, verb: "open") { $0 }
        return try await CacheWriteAccess.find(configuration, command: spec.name)
    }

    /// Applies a change to the local tables: through the daemon when one holds the cache (so its answers show the
    /// change at once), else here under the lock. Returns what the change made, as the API answers it.
    static func apply(_ change: LocalChange, _ configuration: AgentConfiguration) async throws -> JSONValue {
        switch try await writeAccess(configuration) {
        case .daemon(let clientID):
            do {
                return try await DaemonAPI(configuration: configuration, daemon: clientID)
                    .call(change.method, change.request)
            } catch let refusal as DaemonAPI.Refusal {
                switch refusal.code {
                case 400: throw CommandFailure(code: .usage, message: refusal.message)
                case 422: throw CommandFailure(code: .invalid, message: "invalid: \(refusal.message)")
                default: throw CommandFailure(code: .failure, message: refusal.message)
                }
            }
        case .here(let lock):
            let local = try openLocal(configuration)
            let reader = try openCache(configuration)
            let models = try thingModels(configuration)
            return try withExtendedLifetime(lock) {
                try editing {
                    try local.apply(change, isKnown: { (try? reader.device($0)) != nil },
                                    model: { models.model(for: (try? reader.device($0))??.info.productId) })
                }
            }
        }
    }

    /// The thing models of `modelsDirectory` (none without one); a broken model is an error naming it.
    static func thingModels(_ configuration: AgentConfiguration) throws -> ThingModels {
        do {
            return try configuration.modelsDirectory.map { try ThingModels(directory: $0) } ?? ThingModels()
        } catch {
            throw CommandFailure(code: .failure, message: "\(error)")
        }
    }

    /// Opens the local tables read-only (listing groups, networks, metadata).
    static func readLocal(_ configuration: AgentConfiguration) throws -> LocalStore {
        try openExisting(configuration, verb: "read") { try LocalStore(path: $0, readOnly: true) }
    }
}
