import JSON
import Synchronization
import ThingAgent

extension Command {
    /// Opens the request path, connects, runs `body` and closes.
    static func withRequests<T: Sendable>(_ configuration: AgentConfiguration,
                                          _ body: (DeviceRequests) async throws -> T) async throws -> T {
        let requests = try await DeviceRequests.open(configuration, command: spec.name)
        return try await requests.closing {
            try await requests.connect()
            return try await body(requests)
        }
    }
}

/// Who sends a command's device requests. While a daemon holds the cache: the daemon, through its API (it sends
/// each request, tracks it, writes what the answer changes, and answers the command). With none: a stand-in
/// service agent of the command's own, holding the cache's lock meanwhile and running the daemon's code, timers
/// included. Either way the file has one writer and one write path.
final class DeviceRequests: Sendable {
    enum Sender: Sendable {
        case daemon(AgentClient)
        case here(Agent)
    }

    let sender: Sender
    let configuration: AgentConfiguration
    /// Held while the stand-in runs (nil for the daemon's path).
    private let lock: CacheLock?
    private let timers = Mutex<Task<Void, Never>?>(nil)

    private init(_ sender: Sender, configuration: AgentConfiguration, lock: CacheLock?) {
        self.sender = sender
        self.configuration = configuration
        self.lock = lock
    }

    /// Finds the writer and prepares its path without connecting, so that checks which need no broker come first.
    /// The cache file need not exist yet (the stand-in makes it). `command`: the subcommand, named in the lock file.
    static func open(_ configuration: AgentConfiguration, command: String) async throws -> DeviceRequests {
        switch try await CacheWriteAccess.find(configuration, command: command) {
        case .daemon(let clientID):
            return DeviceRequests(.daemon(try DaemonAPI(configuration: configuration, daemon: clientID).client()),
                                  configuration: configuration, lock: nil)
        case .here(let lock):
            return DeviceRequests(.here(try makeStandIn(configuration)), configuration: configuration, lock: lock)
        }
    }

    /// Makes the daemon's stand-in for a command that holds the cache's lock while no daemon runs: it opens the
    /// cache and loads the thing models (errors exit 1), and writes the file with the daemon's code.
    static func makeStandIn(_ configuration: AgentConfiguration) throws -> Agent {
        do {
            return try Agent(configuration: configuration, role: .standIn, logger: CommonOptions.logger(configuration))
        } catch {
            throw CommandFailure(code: .failure, message: "\(error)")
        }
    }

    /// Connects (exit 6 when the broker cannot be used); the stand-in's timers run from then on.
    func connect() async throws {
        switch sender {
        case .daemon(let client):
            do {
                try await client.connect()
            } catch {
                throw CommandFailure(code: .noBroker, message: "cannot use the broker \(configuration.mqtt.broker): \(error.reason)")
            }
        case .here(let agent):
            do {
                try await agent.start()
            } catch {
                throw CommandFailure(code: .noBroker, message: "cannot use the broker \(configuration.mqtt.broker): \(error)")
            }
            timers.withLock { $0 = Task { await agent.runTimers() } }
        }
    }

    /// Disconnects; the stand-in stops (flushing what it wrote) and lets the lock go.
    func close() async {
        switch sender {
        case .daemon(let client):
            await client.disconnect()
        case .here(let agent):
            // The timers end before the stop's last flush, so that no stall verdict lands after it.
            if let running = timers.withLock({ $0 }) {
                running.cancel()
                await running.value
            }
            await agent.stop()
        }
        withExtendedLifetime(lock) {}
    }

    /// Runs `body`, then closes, also when `body` throws.
    func closing<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body())
        } catch {
            outcome = .failure(error)
        }
        await close()
        return try outcome.get()
    }

    /// The daemon's failure as the command reports it.
    func failure(_ error: AgentClientError) -> CommandFailure {
        guard case .daemon(let client) = sender else { return CommandFailure(code: .failure, message: "\(error)") }
        return DaemonAPI(configuration: configuration, daemon: client.daemon).failure(error)
    }

    /// Runs `call` against the daemon, turning its failures into the command's.
    func daemon<T>(_ call: () async throws -> T) async throws -> T {
        do {
            return try await call()
        } catch let error as AgentClientError {
            throw failure(error)
        }
    }

    func checkPropertySet(deviceId: String, _ values: [String: JSONValue], force: Bool) throws(RequestError) {
        switch sender {
        case .daemon(let client): try client.checkPropertySet(deviceId: deviceId, values, force: force)
        case .here(let agent): try agent.checkPropertySet(deviceId: deviceId, values, force: force)
        }
    }

    func sendPropertySet(deviceId: String, _ values: [String: JSONValue], force: Bool) async throws -> RequestOutcome {
        switch sender {
        case .daemon(let client):
            try await daemon {
                try await client.sendPropertySet(deviceId: deviceId, values, timeout: configuration.requestTimeout,
                                                 force: force)
            }
        case .here(let agent):
            await agent.sendPropertySet(deviceId: deviceId, values, force: force)
        }
    }

    func invokeAction(deviceId: String, name: String, params: JSONObject, force: Bool) async throws -> RequestOutcome {
        switch sender {
        case .daemon(let client):
            try await daemon {
                try await client.invokeAction(deviceId: deviceId, name: name, params: params,
                                              timeout: configuration.requestTimeout, force: force)
            }
        case .here(let agent):
            await agent.invokeAction(deviceId: deviceId, name: name, params: params, force: force)
        }
    }

    /// Fresh information from the device, merged into the cache by its writer; the snapshot afterwards.
    func fetch(_ deviceId: String) async throws -> DeviceSnapshot? {
        switch sender {
        case .daemon(let client):
            try await daemon { _ = try await client.fetchInfo(deviceId, timeout: configuration.requestTimeout) }
            return try client.device(deviceId)
        case .here(let agent):
            _ = try await agent.fetchInfo(deviceId)
            return agent.cache.device(deviceId)
        }
    }

    func scanWifiList(_ deviceId: String, force: Bool) async throws -> [WifiNetwork] {
        switch sender {
        case .daemon(let client):
            try await daemon { try await client.scanWifiList(deviceId, timeout: configuration.requestTimeout, force: force) }
        case .here(let agent):
            try await agent.scanWifiList(deviceId, force: force)
        }
    }

    /// The device's detail page, laid out by `detailConfig` (`layout`: that file's JSON, for the daemon);
    /// `connected` false: without the live network check's answer (no broker), composed from the cache file.
    func detail(_ deviceId: String, layout: JSONValue?, connected: Bool) async throws -> DeviceDetail {
        switch sender {
        case .daemon(let client) where connected:
            return try await daemon { try await client.detail(deviceId, layout: layout, timeout: configuration.requestTimeout) }
        case .daemon:
            return try await Self.readOnlyDetail(deviceId, configuration)
        case .here(let agent):
            return await DeviceDetailComposer(agent: agent, config: agent.detailConfig).compose(deviceId)
        }
    }

    /// The page from an observer that is never started: the file read-only, the live check failing for want of a
    /// broker.
    static func readOnlyDetail(_ deviceId: String, _ configuration: AgentConfiguration) async throws -> DeviceDetail {
        let observer = try Agent(configuration: configuration, role: .observer)
        return await DeviceDetailComposer(agent: observer, config: observer.detailConfig).compose(deviceId)
    }

    func runScene(_ scene: Scene, force: Bool) async -> SceneReport {
        switch sender {
        case .daemon(let client): await client.runScene(scene, timeout: configuration.requestTimeout, force: force)
        case .here(let agent): await SceneRunner(agent: agent).run(scene, force: force)
        }
    }
}
