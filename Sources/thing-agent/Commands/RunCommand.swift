import Dispatch
import FoundationEssentials
import Glibc
import Synchronization
import ThingAgent

/// `thing-agent run`: the daemon.
enum RunCommand: Command {
    static let spec = CommandSpec(
        name: "run",
        summary: "run the agent: subscribe to the devices, keep the cache, serve requests",
        usage: "thing-agent run [options]",
        options: CommonOptions.options + [
            OptionSpec(name: "metrics", valueName: "HOST:PORT",
                       help: "serve Prometheus metrics (GET /metrics) and health (GET /health) here "
                           + "(also metricsAddress, THING_AGENT_METRICS; off by default)"),
            OptionSpec(name: "failover-timeout", valueName: "S",
                       help: "with --group-name: seconds within which a standby takes over from a lost active "
                           + "instance (also failoverTimeout, THING_AGENT_FAILOVER_TIMEOUT; default 5)"),
            OptionSpec(name: "home-assistant", valueName: nil,
                       help: "publish Home Assistant MQTT discovery for the fleet and take its commands "
                           + "(also homeAssistant, THING_AGENT_HOME_ASSISTANT; off by default)"),
        ],
        discussion: """
            Connects to the broker with a persistent session, announces itself (retained) on
            thing-agent/agents/<client-id>/status after every connect and reconnect, and runs until SIGTERM
            or SIGINT, then stops taking messages, finishes the write in progress, closes the cache and exits 0.
            SIGHUP re-reads the configuration and applies the log level, thing models, scenes, detail
            layout and firmware catalog (a broken file keeps the previous one); other settings wait for a
            restart.
            One daemon per cache file: a second one on the same --db exits 1 at once, naming the holder.
            Under systemd (Type=notify) it reports READY=1, STATUS=, STOPPING=1 and feeds the watchdog.
            With --metrics HOST:PORT it serves Prometheus metrics at /metrics and a health check at /health
            (200 while connected to the broker and writing to SQLite, 503 otherwise).
            With --group-name G (agentGroup) it is one instance of a group of daemons on several hosts, each with
            its own cache file and client id: every instance keeps the whole cache, one is active (it answers
            the API and acts for the fleet) and the others stand by; a standby takes over within
            --failover-timeout seconds once the active one is lost. thing-agent status says which is which.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        var configuration = try CommonOptions.configuration(arguments)
        if let metrics = arguments.value("metrics") {
            do {
                try configuration.apply(key: "metricsAddress", text: metrics, source: "--metrics")
            } catch {
                throw CommandFailure(code: .usage, message: "\(error.description) (expected HOST:PORT, e.g. 127.0.0.1:9464)")
            }
        }
        if let timeout = arguments.value("failover-timeout") {
            do {
                try configuration.apply(key: "failoverTimeout", text: timeout, source: "--failover-timeout")
            } catch {
                throw CommandFailure(code: .usage, message: "\(error.description) (seconds, 1 to 600)")
            }
        }
        if arguments.has("home-assistant") {
            configuration.homeAssistant.enabled = true
            do {
                try configuration.checkCombinations()
            } catch {
                throw CommandFailure(code: .usage, message: error.description)
            }
        }
        let logger = CommonOptions.logger(configuration)
        // Signals are caught from the start: one that comes while the cache loads (or the journal replays) stops
        // the daemon gracefully as soon as it is up, instead of killing it.
        let stop = StopRequest()
        let signals = SignalWatcher([SIGTERM, SIGINT]) { signal in
            logger.info("received signal \(signal); stopping")
            stop.request()
        }
        defer { signals.cancel() }
        let reload = ConfigurationReload(arguments: arguments, logger: logger)
        let hangups = SignalWatcher([SIGHUP]) { _ in reload.reload() }
        defer { hangups.cancel() }
        let systemd = SystemdSupervision(logger: logger)
        systemd.status("loading the cache \(configuration.cache.database)")
        let agent: Agent
        logger.info("loading the cache", metadata: ["db": configuration.cache.database])
        do {
            agent = try Agent(configuration: configuration, role: .daemon, logger: logger, lockCache: true,
                              shouldStop: { stop.isRequested })
        } catch is StartUpInterrupted {
            logger.info("stopped during start-up; nothing was written")
            return .success
        } catch {
            logger.critical("cannot start: \(error)")
            return .failure
        }
        logger.info("cache loaded", metadata: ["devices": "\(agent.cache.count)", "db": configuration.cache.database])
        reload.attach(agent)
        systemd.status("\(agent.cache.count) devices; waiting for the broker \(configuration.mqtt.broker)")

        let supervision = Mutex<Task<Void, Never>?>(nil)
        let work = Task {
            try await agent.run(onStarted: {
                supervision.withLock { $0 = Task { await systemd.ready(agent) } }
            })
        }
        stop.whenRequested {
            systemd.stopping()
            work.cancel()
        }
        let outcome: ExitCode
        do {
            try await work.value
            outcome = .success
        } catch let error as MetricsServerError {
            logger.critical("\(error)")
            outcome = error.restartCannotFix ? .usage : .failure
        } catch {
            logger.critical("\(error)")
            outcome = .noBroker
        }
        supervision.withLock { $0?.cancel() }
        systemd.stopping()
        return outcome
    }

}

/// A stop asked for by a signal, possibly before there is anything to stop: the action runs once both are there.
final class StopRequest: Sendable {
    private let state = Mutex<(requested: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    func request() {
        let action = state.withLock { state in
            state.requested = true
            return state.action
        }
        action?()
    }

    var isRequested: Bool { state.withLock { $0.requested } }

    func whenRequested(_ action: @escaping @Sendable () -> Void) {
        let requested = state.withLock { state in
            state.action = action
            return state.requested
        }
        if requested { action() }
    }
}

/// Delivers SIGTERM / SIGINT as a callback instead of the default kill, so the agent can stop gracefully.
/// `@unchecked`: the sources are set once in init and dispatch sources are thread-safe to cancel.
final class SignalWatcher: @unchecked Sendable {
    private let sources: [any DispatchSourceSignal]

    init(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { handler(number) }
            source.resume()
            return source
        }
    }

    func cancel() {
        sources.forEach { $0.cancel() }
    }
}
