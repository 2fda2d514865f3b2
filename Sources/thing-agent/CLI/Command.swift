import FoundationEssentials
import Platform
import ThingAgent
#if canImport(Glibc)
import Glibc
#endif

/// One subcommand: its spec (options, help) and what it does.
protocol Command: SendableMetatype {
    static var spec: CommandSpec { get }
    static func run(_ arguments: ParsedArguments) async throws -> ExitCode
    /// Runs the command without the async runtime when these arguments need nothing asynchronous (they read the
    /// cache file and print); nil hands them to `run`. A short command then starts no threads.
    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode?
}

extension Command {
    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode? { nil }
}

/// Where commands write: stdout for results, stderr for errors and logs.
enum Console {
    /// Messages quote what devices said (a refusal's message): nothing in them reaches the terminal raw.
    static func error(_ message: String) {
        writeAll("thing-agent: \(message.terminalSafe(keepingNewlines: true))\n", to: STDERR_FILENO)
    }

    /// A line on stdout, written at once (print buffers when stdout is not a terminal). The program's own
    /// newlines stay; any other control character (from a device-supplied string) is escaped. `--json` output
    /// does not come here: it stays exact.
    static func out(_ line: String) {
        writeAll(line.terminalSafe(keepingNewlines: true) + "\n", to: STDOUT_FILENO)
    }

    /// A line every part of which is safe for a terminal already (a `Format.table`, whose cells were escaped one by
    /// one): written as it is, without a second pass over the text and without the copy that adding the newline to
    /// it would make (`devices` prints 100,000 rows).
    static func out(escaped text: String) {
        writeAll(text, to: STDOUT_FILENO)
        writeAll("\n", to: STDOUT_FILENO)
    }
}

extension Command {
    /// Opens the cache file read-only, with an error that says what to do when it is missing.
    static func openCache(_ configuration: AgentConfiguration) throws -> CacheReader {
        try openExisting(configuration, verb: "read") { try CacheReader(path: $0) }
    }

    /// Opens something over the cache file (a reader, the local store), which must exist: an error says what to do
    /// when it does not, or why it cannot be opened.
    static func openExisting<T>(_ configuration: AgentConfiguration, verb: String,
                                _ open: (String) throws -> T) throws -> T {
        // `access(2)` rather than `FileManager.default`, whose first use builds the file manager and its generic
        // metadata: a tenth of a short `info`'s own work.
        guard access(configuration.cache.database, F_OK) == 0 else {
            throw CommandFailure(code: .failure, message: """
                no cache at \(configuration.cache.database): start the daemon (thing-agent run) or pass --db PATH
                """)
        }
        do {
            return try open(configuration.cache.database)
        } catch {
            throw CommandFailure(code: .failure, message: "cannot \(verb) the cache \(configuration.cache.database): \(error)")
        }
    }

    /// The device id positional, validated.
    static func deviceArgument(_ arguments: ParsedArguments) throws -> String {
        guard let device = arguments.positionals.first else {
            throw CommandFailure(code: .usage, message: "missing DEVICE\nUsage: \(spec.usage)")
        }
        guard DeviceID.isValid(device) else {
            throw CommandFailure(code: .usage, message: """
                '\(device)' is not a device id (1 to 64 characters from A-Z a-z 0-9 . _ : -)
                """)
        }
        return device
    }

    /// Starts an observer (`watch`): every device topic into memory, nothing written. A broker failure exits 6.
    static func startObserver(_ configuration: AgentConfiguration) async throws -> Agent {
        let agent: Agent
        do {
            agent = try Agent(configuration: configuration, role: .observer, logger: CommonOptions.logger(configuration))
        } catch {
            throw CommandFailure(code: .failure, message: "\(error)")
        }
        try await connect(agent, configuration)
        return agent
    }

    /// Connects an agent, mapping a broker failure to exit code 6.
    static func connect(_ agent: Agent, _ configuration: AgentConfiguration) async throws {
        do {
            try await agent.start()
        } catch {
            await agent.stop()
            throw CommandFailure(code: .noBroker, message: "cannot use the broker \(configuration.mqtt.broker): \(error)")
        }
    }

    /// The value of a `--timeout S` option: nil when absent, a usage error when not a positive number.
    static func seconds(_ arguments: ParsedArguments, _ option: String = "timeout") throws -> Double? {
        guard let text = arguments.value(option) else { return nil }
        guard let seconds = InputBounds.seconds(text) else { throw CommandFailure.badSeconds(option) }
        return seconds
    }

    /// Applies `--timeout S` to `requestTimeout`.
    static func applyTimeout(_ arguments: ParsedArguments, to configuration: inout AgentConfiguration) throws {
        if let timeout = try seconds(arguments) { configuration.requestTimeout = .seconds(timeout) }
    }
}

extension RequestError {
    /// The description with what the command line can do about it (the library's names its own parameter).
    var commandLineDescription: String {
        if case .deviceOffline(let id) = self { return "device \(id) is offline; nothing was sent (use --force to send anyway)" }
        return description
    }

    var exitCode: ExitCode {
        switch self {
        case .deviceOffline: .offline
        case .unsupported: .failure
        case .notSent: .noBroker
        // The agent's own limit of requests waiting for answers: a failed action, not a broker that cannot be used.
        case .tooManyInFlight: .failure
        case .refused: .refused
        case .timeout: .timeout
        case .invalid: .invalid
        case .cancelled: .failure
        }
    }
}
