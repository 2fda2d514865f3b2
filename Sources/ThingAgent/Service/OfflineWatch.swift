import Synchronization

/// Turns "offline for longer than the grace period" into one `offlineWarning` event.
/// A device back online within the grace period produces none.
final class OfflineWatch: Sendable {
    let grace: Duration
    private let hub: EventHub
    /// Devices that went offline and have not been warned about yet, with the agent time they went offline.
    private let pending = Mutex<[String: Millis]>([:])

    /// Asked (off the receive path, when a warning is due) whether the device's offline-warning switch is on.
    private let isEnabled: @Sendable (String) -> Bool

    init(grace: Duration, hub: EventHub, isEnabled: @escaping @Sendable (String) -> Bool = { _ in true }) {
        self.grace = grace
        self.hub = hub
        self.isEnabled = isEnabled
    }

    /// A removed device is not warned about.
    func forget(_ device: String) {
        pending.withLock { _ = $0.removeValue(forKey: device) }
    }

    func statusChanged(_ device: String, online: Bool, now: Millis) {
        pending.withLock { $0[device] = online ? nil : now }
    }

    /// Checks for expired grace periods until cancelled.
    func run() async {
        let graceMillis = Int64(grace.seconds * 1000)
        let tick = Duration.milliseconds(min(1000, max(20, graceMillis / 10)))
        while !Task.isCancelled {
            try? await Task.sleep(for: tick)
            let now = Timestamp.now()
            let due = pending.withLock { pending -> [(String, Millis)] in
                let due = pending.filter { now - $0.value >= graceMillis }
                for id in due.keys { pending[id] = nil }
                return due.map { ($0.key, $0.value) }
            }
            for (device, since) in due.sorted(by: { $0.1 < $1.1 }) where isEnabled(device) {
                hub.publish([.offlineWarning(deviceId: device, offlineSince: since)])
            }
        }
    }
}
