import Synchronization
import ThingAgent

/// SIGHUP for the daemon: re-reads the configuration (file, environment, flags as at start) and applies what can
/// change without a restart: the log level, the thing models, the scenes, the detail layout. A broken file keeps
/// the part it would replace; the daemon never ends on a reload.
final class ConfigurationReload: Sendable {
    private let arguments: ParsedArguments
    private let logger: AgentLogger
    private let agent = Mutex<Agent?>(nil)

    init(arguments: ParsedArguments, logger: AgentLogger) {
        self.arguments = arguments
        self.logger = logger
    }

    /// From now on a SIGHUP reloads into `agent`; before, there is nothing to reload yet.
    func attach(_ agent: Agent) {
        self.agent.withLock { $0 = agent }
    }

    func reload() {
        guard let agent = agent.withLock({ $0 }) else {
            logger.notice("received SIGHUP while starting; nothing to reload yet")
            return
        }
        let configuration: AgentConfiguration
        do {
            configuration = try CommonOptions.configuration(arguments)
        } catch {
            logger.error("received SIGHUP; nothing reloaded: \(error)")
            return
        }
        let level = configuration.logLevel
        // First, so that what the reload says is logged at the level it asked for.
        logger.changeSharedLevel(to: level)
        let report = agent.reload(configuration)
        logger.notice("received SIGHUP; reloaded", metadata: [
            "logLevel": level.description, "reloaded": report.reloaded.joined(separator: "; "),
        ])
        for kept in report.kept { logger.error("received SIGHUP; kept the previous \(kept)") }
        var restartOnly = configuration
        restartOnly.logLevel = agent.configuration.logLevel
        restartOnly.modelsDirectory = agent.configuration.modelsDirectory
        restartOnly.detailConfig = agent.configuration.detailConfig
        restartOnly.scenesFile = agent.configuration.scenesFile
        if restartOnly != agent.configuration {
            logger.warning("received SIGHUP; other settings changed too and take effect at the next restart")
        }
    }
}
