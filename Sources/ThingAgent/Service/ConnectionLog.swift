import Foundation
import MQTT
import Synchronization
import ThingAgentCore

/// Says in the log when the broker connection is made, lost and made again, and keeps what the metrics and the
/// health check read about it (lock-free: the MQTT client calls this on its network thread).
final class ConnectionLog: Sendable {
    private let broker: String
    private let clientID: String
    private let logger: AgentLogger
    /// Connected now.
    private let connected = Atomic<Bool>(false)
    /// Connections lost since start.
    private let losses = Atomic<Int>(0)
    /// When the current outage began (monotonic nanoseconds, 0 while connected or before the first connect).
    private let lostAtNanos = Atomic<UInt64>(0)
    /// Connects reported at info level: the daemon's, not every CLI command's.
    private let connectLevel: AgentLogger.Level

    init(broker: String, clientID: String, logger: AgentLogger, quiet: Bool) {
        self.broker = broker
        self.clientID = clientID
        self.logger = logger
        connectLevel = quiet ? .debug : .info
    }

    var isConnected: Bool { connected.load(ordering: .relaxed) }
    var lostConnections: Int { losses.load(ordering: .relaxed) }

    func changed(_ state: MQTTConnectionState, _ error: MQTTError?) {
        switch state {
        case .connected:
            connected.store(true, ordering: .relaxed)
            let lostAt = lostAtNanos.exchange(0, ordering: .relaxed)
            if lostAt == 0 {
                logger.log(connectLevel, "connected to \(broker)", metadata: ["clientId": clientID])
            } else {
                let away = Double(DispatchTime.now().uptimeNanoseconds &- lostAt) / 1e9
                logger.log(connectLevel, "reconnected to \(broker) after \(String(format: "%.1f", away)) s",
                           metadata: ["clientId": clientID])
            }
        case .reconnecting(let reason):
            if connected.exchange(false, ordering: .relaxed) {
                losses.add(1, ordering: .relaxed)
                lostAtNanos.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            }
            if let error, error.kind == .clientIDInUse {
                logger.error("another client uses client id \"\(clientID)\"; backing off before reconnecting",
                             metadata: ["broker": broker, "reason": error.message])
            } else {
                logger.warning("connection lost; reconnecting", metadata: ["reason": reason])
            }
        case .stopped:
            connected.store(false, ordering: .relaxed)
            if let error { logger.error("stopped: \(error)") }
        case .idle, .connecting:
            connected.store(false, ordering: .relaxed)
        }
    }
}
