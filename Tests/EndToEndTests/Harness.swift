import Foundation
import JSON
import Testing
import TestSupport

/// The real `thing-agent` executable against a real broker: a daemon and CLI calls sharing one cache file.
final class AgentHarness: Sendable {
    let broker: MosquittoBroker
    let directory: String
    let database: String
    let clientID: String
    /// Settings every start of the daemon gets (a test's own `environment` adds to them).
    let daemonEnvironment: [String: String]
    private let daemonBox = DaemonBox()

    /// `database`: where the cache goes (the daemon's log stays in `directory`); in `directory` when nil.
    /// `clientID`: the daemon's client id; a fresh one when nil.
    init(broker: MosquittoBroker, database: String? = nil, daemonEnvironment: [String: String] = [:],
         clientID: String? = nil) throws {
        self.broker = broker
        self.daemonEnvironment = daemonEnvironment
        directory = try makeTemporaryDirectory("thing-agent-e2e")
        self.database = database ?? directory + "/cache.sqlite"
        self.clientID = clientID ?? "agent-\(UInt32.random(in: 0...UInt32.max))"
    }

    var commonArguments: [String] {
        ["--broker", broker.url, "--db", database, "--client-id", clientID]
    }

    /// Starts `thing-agent run` and waits until it announced itself online. `offline`: against a broker that is
    /// not there instead, waiting only until the cache is loaded (and the journal replayed into it).
    func startDaemon(_ extra: [String] = [], environment: [String: String] = [:], offline: Bool = false,
                     timeout: Duration = .seconds(10)) async throws {
        let brokerURL = offline ? "mqtt://127.0.0.1:\(try freeLoopbackPort())" : broker.url
        let arguments = ["run", "--broker", brokerURL, "--db", database, "--client-id", clientID] + extra
        let daemon = try DaemonProcess(thingAgentExecutable(), arguments,
                                       environment: daemonEnvironment.merging(environment) { $1 },
                                       logPath: directory + "/daemon.log")
        daemonBox.set(daemon)
        let ready = offline ? "cache loaded" : "connected and subscribed"
        try await waitUntil(timeout: timeout) { daemon.log.contains(ready) || !daemon.isRunning }
        guard daemon.isRunning else {
            throw TestSupportError("the daemon exited: \(daemon.log)")
        }
    }

    var daemon: DaemonProcess? { daemonBox.get() }

    /// Stops the daemon with SIGTERM and waits until it has exited.
    func stopDaemon() async throws {
        let daemon = try #require(self.daemon)
        daemon.signal(SIGTERM)
        try await waitUntil(timeout: .seconds(20)) { !daemon.isRunning }
    }

    /// Runs a CLI subcommand against the same broker and cache.
    func cli(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> ProcessResult {
        try await runCommand(thingAgentExecutable(), arguments + ["--broker", broker.url, "--db", database],
                             timeout: timeout)
    }

    /// `info DEVICE --json`, parsed; nil when the device is unknown.
    func info(_ device: String) async throws -> JSONObject? {
        let result = try await cli(["info", device, "--json"])
        guard result.status == 0 else { return nil }
        return try JSONParser.parse(result.stdout).objectValue
    }

    /// Polls `info --json` until `condition` holds.
    func waitForInfo(_ device: String, timeout: Duration = .seconds(15),
                     _ condition: @escaping @Sendable (JSONObject) -> Bool) async throws -> JSONObject {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let info = try await info(device), condition(info) { return info }
            if ContinuousClock.now > deadline {
                let last = try await cli(["info", device, "--json"])
                throw TestSupportError("condition not met for \(device); last info: \(last.stdout) \(last.stderr)\n"
                    + "daemon log: \(daemon?.log ?? "")")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    deinit {
        daemonBox.get()?.signal(SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Holds the current daemon; replaced on restart.
final class DaemonBox: @unchecked Sendable {
    // Guarded by `lock`; a plain lock keeps this tiny box free of actor hops in tests.
    private let lock = NSLock()
    private var daemon: DaemonProcess?

    func set(_ value: DaemonProcess?) { lock.withLock { daemon = value } }
    func get() -> DaemonProcess? { lock.withLock { daemon } }
}
