import Foundation
import Synchronization
import ThingAgent

// The one way the tests run an agent in process: its configuration, a directory for its cache (and thing models),
// started until subscribed, stopped afterwards.

/// What the tests start an agent with: `broker`, the cache file `cache.sqlite` in `directory`, a client id of its
/// own (`lib-<random>`), a 30 s offline grace period and a 2 s request timeout.
public func agentConfiguration(_ broker: MosquittoBroker, directory: String) -> AgentConfiguration {
    agentConfiguration(brokerURL: broker.url, directory: directory)
}

/// `agentConfiguration(_:directory:)` for a broker given by its URL.
public func agentConfiguration(brokerURL: String, directory: String) -> AgentConfiguration {
    var configuration = AgentConfiguration()
    configuration.mqtt.broker = brokerURL
    configuration.cache.database = directory + "/cache.sqlite"
    configuration.mqtt.clientID = "lib-\(UInt32.random(in: 0...UInt32.max))"
    configuration.offlineGracePeriod = .seconds(30)
    configuration.requestTimeout = .seconds(2)
    return configuration
}

/// For `withAgent(configure:)`: the shipped thing models (Config/models) as the agent's models.
public func useShippedModels(_ configuration: inout AgentConfiguration) {
    configuration.modelsDirectory = shippedModelsDirectory()
}

/// Runs `body` with an agent on `broker`, started until the broker acknowledged its subscriptions, and stops it
/// afterwards (also when `body` throws). `body` gets the agent and its directory.
///
/// - `directory`: where the cache file goes; by default a fresh temporary directory, removed afterwards. A given
///   directory is the caller's and stays (an agent started again on the same cache).
/// - `configure`: changes `agentConfiguration(broker, directory:)` before the agent is made.
/// - `models`: thing models (their JSON text), written to `<directory>/models` and made the `modelsDirectory`
///   before `configure` runs (which may still change it). None: no models directory.
@discardableResult
public func withAgent<T: Sendable>(
    _ broker: MosquittoBroker, directory: String? = nil, configure: (inout AgentConfiguration) -> Void = { _ in },
    models: [String] = [], logger: AgentLogger = .disabled, _ body: (Agent, String) async throws -> T
) async throws -> T {
    try await withAgentDirectory(directory) { directory in
        var configuration = agentConfiguration(broker, directory: directory)
        try writeModels(models, in: directory, into: &configuration)
        configure(&configuration)
        return try await Agent(configuration: configuration, logger: logger).whileRunning { agent in
            try await body(agent, directory)
        }
    }
}

/// `withAgent` for a body that needs the agent only.
@discardableResult
public func withAgent<T: Sendable>(
    _ broker: MosquittoBroker, directory: String? = nil, configure: (inout AgentConfiguration) -> Void = { _ in },
    models: [String] = [], logger: AgentLogger = .disabled, _ body: (Agent) async throws -> T
) async throws -> T {
    try await withAgent(broker, directory: directory, configure: configure, models: models, logger: logger) {
        agent, _ in try await body(agent)
    }
}

/// Runs `body` with an agent made as `withAgent` makes it but never started, with no broker (its address a free
/// loopback port nothing listens on): messages go in through `receive`, as the network thread hands them. `body`
/// gets the agent and its directory, a fresh temporary one removed afterwards.
@discardableResult
public func withUnstartedAgent<T: Sendable>(
    configure: (inout AgentConfiguration) -> Void = { _ in }, models: [String] = [],
    logger: AgentLogger = .disabled, _ body: (Agent, String) async throws -> T
) async throws -> T {
    let port = try freeLoopbackPort()
    defer { releaseLoopbackPort(port) }
    return try await withAgentDirectory(nil) { directory in
        var configuration = agentConfiguration(brokerURL: "mqtt://127.0.0.1:\(port)", directory: directory)
        try writeModels(models, in: directory, into: &configuration)
        configure(&configuration)
        return try await body(try Agent(configuration: configuration, logger: logger), directory)
    }
}

/// `given`, or a fresh temporary directory removed once `body` returned or threw.
private func withAgentDirectory<T>(_ given: String?, _ body: (String) async throws -> T) async throws -> T {
    if let given { return try await body(given) }
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try await body(directory)
}

private func writeModels(_ models: [String], in directory: String,
                         into configuration: inout AgentConfiguration) throws {
    guard !models.isEmpty else { return }
    let modelsDirectory = directory + "/models"
    try FileManager.default.createDirectory(atPath: modelsDirectory, withIntermediateDirectories: true)
    for (index, model) in models.enumerated() {
        try model.write(toFile: "\(modelsDirectory)/model\(index).json", atomically: true, encoding: .utf8)
    }
    configuration.modelsDirectory = modelsDirectory
}

extension Agent {
    /// Runs the agent in a task, returned once the broker acknowledged its subscriptions: "connected" alone is not
    /// enough, a report published before the SUBACK would not reach it. The wait is long: when two suites start
    /// at once, each starting a Home Assistant, a provisioning agent's start (its broker roles first) took over 30 s.
    public func runUntilSubscribed() async throws -> Task<Void, any Error> {
        let subscribed = SubscribedFlag()
        let running = Task { try await run(onStarted: { subscribed.set() }) }
        do {
            try await waitUntil(timeout: .seconds(90)) { subscribed.isSet }
        } catch {
            running.cancel()
            throw error
        }
        return running
    }

    /// Runs the agent until it is subscribed, then `body`; stops it afterwards, also when `body` throws.
    @discardableResult
    public func whileRunning<T: Sendable>(_ body: (Agent) async throws -> T) async throws -> T {
        let running = try await runUntilSubscribed()
        let result: T
        do {
            result = try await body(self)
        } catch {
            running.cancel()
            _ = try? await running.value
            throw error
        }
        running.cancel()
        _ = try? await running.value
        return result
    }
}

private final class SubscribedFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}
