import Synchronization
import ThingAgentCore

/// Ends a firmware upgrade that made no progress for `stallTimeout` (`otaStallTimeout`) as failed with failedCode
/// `timeout`, through the cache writer, as `TransferWatch` does for gateway transfers. The daemon runs it; it
/// hears every upgrade change from the writer.
final class OTAWatch: CacheWatch {
    let stallTimeout: Duration
    private let writer: CacheWriter
    private let logger: AgentLogger
    /// Running upgrades: device to the agent time of its latest change.
    private let running = Mutex<[String: Millis]>([:])

    init(stallTimeout: Duration, writer: CacheWriter, logger: AgentLogger) {
        self.stallTimeout = stallTimeout
        self.writer = writer
        self.logger = logger
    }

    /// Starts watching the running upgrades already cached (the daemon at start). Their clocks start now: the
    /// broker may still hold reports that were published while the agent was away.
    func watchCached(_ upgrades: [OTAUpgrade], now: Millis) {
        running.withLock { running in
            for upgrade in upgrades where upgrade.isRunning { running[upgrade.deviceId] = now }
        }
    }

    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {}

    func removed(_ device: String) {
        running.withLock { _ = $0.removeValue(forKey: device) }
    }

    func upgradeChanged(_ upgrade: OTAUpgrade) {
        running.withLock { $0[upgrade.deviceId] = upgrade.isRunning ? upgrade.updatedAt : nil }
    }

    /// Fails the upgrades that stalled; returns the ones it ended.
    @discardableResult
    func failStalled(now: Millis) -> [OTAUpgrade] {
        let limit = Int64(stallTimeout.seconds * 1000)
        let due = running.withLock { $0.filter { now - $0.value >= limit } }
        var ended: [OTAUpgrade] = []
        for (device, lastChange) in due.sorted(by: { $0.key < $1.key }) {
            do {
                let current = try writer.failStalledUpgrade(device: device, lastChange: lastChange, now: now)
                if let current, current.stage == .failed, current.endedAt == now { ended.append(current) }
                running.withLock { running in
                    guard running[device] == lastChange else { return }
                    running[device] = current.flatMap { $0.isRunning ? $0.updatedAt : nil }
                }
            } catch {
                logger.error("could not end a stalled firmware upgrade", metadata: ["device": device, "error": "\(error)"])
            }
        }
        for upgrade in ended {
            logger.warning("firmware upgrade made no progress and ended as failed", metadata: [
                "device": upgrade.deviceId, "version": upgrade.image.version, "stage": "timeout",
                "otaStallTimeout": "\(stallTimeout.seconds)"])
        }
        return ended
    }

    /// Checks for stalls until cancelled.
    /// A standby of a group gives no verdict (`standing`): the active one's reaches it as a record.
    func run(_ standing: Standing) async {
        await runStallChecks(timeout: stallTimeout) { if standing.isActive { failStalled(now: $0) } }
    }
}
