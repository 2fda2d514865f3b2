import Synchronization
import ThingAgentCore

/// Ends a gateway replacement that made no progress (no status change) for `stallTimeout` as failed with
/// failedCode `timeout`, through the cache writer, so the verdict is persisted and heard like a report.
/// It watches every transfer the writer applies.
final class TransferWatch: Sendable {
    let stallTimeout: Duration
    private let writer: CacheWriter
    private let topics: Topics
    private let logger: AgentLogger
    private struct State {
        /// Running transfers: gateway to the agent time of its latest change.
        var running: [String: Millis] = [:]
    }
    private let state: Mutex<State>

    init(stallTimeout: Duration, writer: CacheWriter, topics: Topics, logger: AgentLogger) {
        self.stallTimeout = stallTimeout
        self.writer = writer
        self.topics = topics
        self.logger = logger
        state = Mutex(State())
    }

    /// Starts watching the running transfers already cached (the daemon at start). Their clocks start now: the
    /// broker may still hold reports that were published while the agent was away.
    func watchCached(_ devices: [DeviceSnapshot], now: Millis) {
        state.withLock { state in
            for device in devices {
                guard let transfer = device.transfer, !transfer.status.isIdle else { continue }
                state.running[device.id] = now
            }
        }
    }

    /// Called after every committed transfer change.
    func transferChanged(_ info: TransferInfo) {
        state.withLock { state in
            state.running[info.sourceDeviceId] = info.status.isIdle ? nil : info.updatedAt
        }
    }

    /// A removed gateway has no transfer left to judge.
    func forgetGateway(_ gateway: String) {
        state.withLock { _ = $0.running.removeValue(forKey: gateway) }
    }

    /// Fails the transfers that stalled; returns the ones it ended.
    @discardableResult
    func failStalled(now: Millis) -> [TransferInfo] {
        let limit = Int64(stallTimeout.seconds * 1000)
        let due = state.withLock { $0.running.filter { now - $0.value >= limit } }
        var ended: [TransferInfo] = []
        for (gateway, lastChange) in due.sorted(by: { $0.key < $1.key }) {
            do {
                let current = try writer.failStalledTransfer(gateway: gateway, lastChange: lastChange, now: now,
                                                             topic: topics.transferStatus(gateway))
                if let current, current.status == .failed, current.updatedAt == now {
                    ended.append(current)
                    // The verdict ends the transfer this agent started: a finish the gateway sends after it is not
                    // trusted without a new start (counted and logged as untrusted; nothing moves).
                    if let target = current.targetDeviceId { writer.forgetAcceptedTransfer(gateway: gateway, target: target) }
                }
                state.withLock { state in
                    guard state.running[gateway] == lastChange else { return }  // a report moved it meanwhile
                    state.running[gateway] = current.flatMap { $0.status.isIdle ? nil : $0.updatedAt }
                }
            } catch {
                logger.error("could not end a stalled gateway transfer", metadata: [
                    "gateway": gateway, "error": "\(error)"])
            }
        }
        for info in ended {
            logger.warning("gateway transfer made no progress and ended as failed", metadata: [
                "gateway": info.sourceDeviceId, "target": info.targetDeviceId ?? "",
                "stallTimeout": "\(stallTimeout.seconds)"])
        }
        return ended
    }

    /// Checks for stalls until cancelled.
    /// A standby of a group gives no verdict (`standing`): the active one's reaches it as a record.
    func run(_ standing: Standing) async {
        await runStallChecks(timeout: stallTimeout) { if standing.isActive { failStalled(now: $0) } }
    }
}
