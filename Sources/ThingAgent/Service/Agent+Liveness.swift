import MQTT
import ThingAgentCore

extension Agent {
    /// True while the receive path (the network thread, which also runs the ingestor) and the flusher thread both
    /// went round their loops within `limit`: what a watchdog ping vouches for. A stuck write, a stuck callback or a
    /// stopped agent makes it false. A receive path that deliberately holds intake (the storage cannot keep a
    /// message) is alive as long as its wait goes round: it resumes by itself once the storage works again.
    public func isAlive(within limit: Duration) -> Bool {
        guard let network = client.networkThreadIdle else { return false }
        guard network < limit || (ingestor.holdIdle.map { $0 < limit } ?? false) else { return false }
        guard let flush = flusher.idle, flush < limit else { return false }
        return true
    }

    /// One line for `systemctl status`: the devices cached and the broker connection.
    public var statusLine: String {
        let url = connectionLog.broker.url
        let broker: String = switch client.state {
        case .connected: "connected to \(url)"
        case .connecting, .idle: "connecting to \(url)"
        case .reconnecting(let reason): "reconnecting to \(url) (\(reason))"
        case .stopped: "disconnected"
        }
        let line = "\(cache.count) devices; broker \(broker)"
        return groupStatus.map { "\(line); \($0)" } ?? line
    }
}
