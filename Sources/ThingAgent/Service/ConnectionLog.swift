import Dispatch
import FoundationEssentials
import MQTT
import Platform
import Synchronization
import ThingAgentCore

/// Says in the log when the broker connection is made, lost and made again, naming the broker of the list in use,
/// and keeps what the metrics and the health check read about it (lock-free: the MQTT client calls this on its
/// network thread, and a scrape takes none of its locks).
final class ConnectionLog: Sendable {
    /// The configured brokers (`AgentConfiguration.MQTT.brokers`).
    let brokers: [String]
    private let clientID: String
    private let logger: AgentLogger
    /// The configured version is `.auto`: a broker that speaks 3.1.1 only is said once, when first reached.
    private let autoVersion: Bool
    /// Connected now.
    private let connected = Atomic<Bool>(false)
    /// Connections lost since start.
    private let losses = Atomic<Int>(0)
    /// When the current outage began (monotonic nanoseconds, 0 while connected or before the first connect).
    private let lostAtNanos = Atomic<UInt64>(0)
    /// The broker in use (or, while reconnecting, last tried): an index of `brokers`.
    private let inUse = Atomic<Int>(0)
    /// Whether the broker in use is spoken to in MQTT 3.1.1.
    private let inUseSpeaks311 = Atomic<Bool>(false)
    /// Connects reported at info level: the daemon's, not every CLI command's.
    private let connectLevel: AgentLogger.Level
    /// The client whose broker the lines name (`follow`), and the brokers already said to speak 3.1.1 only.
    private let followed = Mutex(Followed())

    private struct Followed {
        weak var client: MQTTClient?
        var said311: Set<String> = []
    }

    init(brokers: [String], autoVersion: Bool, clientID: String, logger: AgentLogger, quiet: Bool) {
        self.brokers = brokers
        self.autoVersion = autoVersion
        self.clientID = clientID
        self.logger = logger
        connectLevel = quiet ? .debug : .info
    }

    /// The client this log is about; called once, right after it is made and before it connects.
    func follow(_ client: MQTTClient) {
        followed.withLock { $0.client = client }
    }

    var isConnected: Bool { connected.load(ordering: .relaxed) }
    var lostConnections: Int { losses.load(ordering: .relaxed) }

    /// The broker in use (while reconnecting: the one last tried) and the MQTT version spoken to it.
    var broker: (url: String, version: String) {
        (brokers[inUse.load(ordering: .relaxed)], inUseSpeaks311.load(ordering: .relaxed) ? "3.1.1" : "5")
    }

    func changed(_ state: MQTTConnectionState, _ error: MQTTError?) {
        let url = noteBroker()
        switch state {
        case .connected:
            connected.store(true, ordering: .relaxed)
            let lostAt = lostAtNanos.exchange(0, ordering: .relaxed)
            if lostAt == 0 {
                logger.log(connectLevel, "connected to \(url)", metadata: ["clientId": clientID])
            } else {
                let away = Double(DispatchTime.now().uptimeNanoseconds &- lostAt) / 1e9
                logger.log(connectLevel, "reconnected to \(url) after \(away.fixed(1)) s",
                           metadata: ["clientId": clientID])
            }
        case .reconnecting(let reason):
            if connected.exchange(false, ordering: .relaxed) {
                losses.add(1, ordering: .relaxed)
                lostAtNanos.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            }
            if let error, error.kind == .clientIDInUse {
                logger.error("another client uses client id \"\(clientID)\"; backing off before reconnecting",
                             metadata: ["broker": url, "reason": error.message])
            } else {
                logger.warning("connection lost; reconnecting", metadata: ["broker": url, "reason": reason])
            }
        case .stopped:
            connected.store(false, ordering: .relaxed)
            if let error { logger.error("stopped: \(error)") }
        case .idle, .connecting:
            connected.store(false, ordering: .relaxed)
        }
    }

    /// Reads the broker the client uses now into the atomics, says once per broker that it speaks 3.1.1 only (with
    /// `auto`), and returns its URL.
    private func noteBroker() -> String {
        let (broker, first311) = followed.withLock { followed -> ((url: String, version: MQTTProtocolVersion)?, Bool) in
            guard let broker = followed.client?.broker else { return (nil, false) }
            let first = autoVersion && broker.version == .v311 && followed.said311.insert(broker.url).inserted
            return (broker, first)
        }
        guard let broker else { return brokers[inUse.load(ordering: .relaxed)] }
        inUse.store(brokers.firstIndex(of: broker.url) ?? 0, ordering: .relaxed)
        inUseSpeaks311.store(broker.version == .v311, ordering: .relaxed)
        if first311 {
            logger.log(connectLevel == .info ? .notice : .debug,
                       "\(broker.url) refused MQTT 5; speaking MQTT 3.1.1 to it from now on",
                       metadata: ["clientId": clientID])
        }
        return broker.url
    }
}
