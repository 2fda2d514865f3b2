import Synchronization
import ThingAgentCore

/// Turns "offline for longer than the grace period" into one `offlineWarning` event, and the return of a device it
/// warned about into one `backOnline` event. A device back online within the grace period produces neither.
///
/// Exactly one warning per offline episode, across restarts too: the episodes are kept in the cache file
/// (`OfflineAlertStore`), rebuilt at start (`restore`), and a warning is recorded as given before it is published,
/// so a daemon stopped or killed during a grace period warns after its restart, and one killed after warning does
/// not warn again.
final class OfflineWatch: Sendable {
    typealias Alert = OfflineAlertStore.Alert

    let grace: Duration
    private let hub: EventHub
    private let store: OfflineAlertStore?
    private let logger: AgentLogger

    private struct State {
        /// Devices offline now (as far as the watch knows), with the agent time they went offline.
        var alerts: [String: Alert] = [:]
        /// Devices whose alert changed since the last save.
        var unsaved: Set<String> = []
    }

    private let state = Mutex(State())
    private let warnings = Atomic<Int>(0)

    /// Asked (off the receive path, when a warning is due) whether the device's offline-warning switch is on.
    private let isEnabled: @Sendable (String) -> Bool
    /// Warnings are given by the active instance of a group alone; a standby keeps the episodes and warns about
    /// those still due once it takes over.
    private let standing: Standing

    init(grace: Duration, hub: EventHub, store: OfflineAlertStore? = nil, logger: AgentLogger = .disabled,
         standing: Standing = Standing(group: nil, instance: ""),
         isEnabled: @escaping @Sendable (String) -> Bool = { _ in true }) {
        self.standing = standing
        self.grace = grace
        self.hub = hub
        self.store = store
        self.logger = logger
        self.isEnabled = isEnabled
    }

    /// Offline warnings published since start.
    var warningsPublished: Int { warnings.load(ordering: .relaxed) }

    /// Whether `device` is offline as far as the watch knows (its grace running, or warned about).
    func isWatching(_ device: String) -> Bool {
        state.withLock { $0.alerts[device] != nil }
    }

    /// A removed device, or a gateway just replaced by another, is not warned about.
    func forget(_ device: String) {
        state.withLock { state in
            guard state.alerts.removeValue(forKey: device) != nil else { return }
            state.unsaved.insert(device)
        }
    }

    /// Called from the receive path when a device's status flipped.
    func statusChanged(_ device: String, online: Bool, now: Millis) {
        let returned: Alert? = state.withLock { state in
            if online {
                guard let alert = state.alerts.removeValue(forKey: device) else { return nil }
                state.unsaved.insert(device)
                return alert.warned ? alert : nil
            }
            guard state.alerts[device] == nil else { return nil }
            state.alerts[device] = Alert(offlineSince: now, warned: false)
            state.unsaved.insert(device)
            return nil
        }
        if let returned {
            hub.publish([.backOnline(deviceId: device, offlineSince: returned.offlineSince,
                                     away: max(0, now - returned.offlineSince))])
        }
    }

    /// Rebuilds the episodes at start from what the cache says is offline, after the journal replay: the saved
    /// alert of a device keeps its time and whether it was warned; an offline device without one (it went offline
    /// just before a kill, before the alert was saved) counts from its last change. Saved alerts of devices that
    /// are online now are removed.
    func restore(offline cached: [(id: String, lastChange: Millis)]) {
        let saved: [String: Alert]
        do {
            saved = try store?.load() ?? [:]
        } catch {
            logger.warning("could not read the saved offline alerts", metadata: ["error": "\(error)"])
            saved = [:]
        }
        state.withLock { state in
            let offline = Set(cached.map(\.id))
            for (id, lastChange) in cached {
                if let alert = saved[id] {
                    state.alerts[id] = alert
                } else if state.alerts[id] == nil {
                    state.alerts[id] = Alert(offlineSince: lastChange, warned: false)
                }
                state.unsaved.insert(id)
            }
            for id in saved.keys where !offline.contains(id) {
                state.alerts[id] = nil
                state.unsaved.insert(id)
            }
        }
        save()
    }

    /// Checks for expired grace periods until cancelled.
    func run() async {
        let graceMillis = Int64(grace.seconds * 1000)
        let tick = Duration.milliseconds(min(1000, max(20, graceMillis / 10)))
        while !Task.isCancelled {
            if standing.isActive { warnDue(now: Timestamp.now(), graceMillis: graceMillis) }
            try? await Task.sleep(for: tick)
        }
        save()
    }

    /// Saves what changed, then publishes the warnings that are due: recorded first, so that a kill in between
    /// loses a warning rather than giving it twice. A device whose warning switch is off is dropped from the watch
    /// instead (so its return is no news either).
    private func warnDue(now: Millis, graceMillis: Int64) {
        let candidates = state.withLock { state in
            state.alerts.filter { !$0.value.warned && now - $0.value.offlineSince >= graceMillis }.map(\.key)
        }
        let enabled = Dictionary(uniqueKeysWithValues: candidates.map { ($0, isEnabled($0)) })
        let due = state.withLock { state -> [(String, Millis)] in
            var due: [(String, Millis)] = []
            for (id, on) in enabled {
                // Back online meanwhile (the receive path runs on): nothing to warn about.
                guard let alert = state.alerts[id], !alert.warned else { continue }
                state.unsaved.insert(id)
                if on {
                    state.alerts[id]?.warned = true
                    due.append((id, alert.offlineSince))
                } else {
                    state.alerts[id] = nil
                }
            }
            return due
        }
        save()
        for (device, since) in due.sorted(by: { $0.1 < $1.1 }) {
            warnings.add(1, ordering: .relaxed)
            hub.publish([.offlineWarning(deviceId: device, offlineSince: since)])
        }
    }

    /// Writes the changed alerts; on failure they stay marked and are tried again at the next tick.
    func save() {
        guard let store else { return }
        let changes = state.withLock { state -> [String: Alert?] in
            defer { state.unsaved.removeAll() }
            return Dictionary(uniqueKeysWithValues: state.unsaved.map { ($0, state.alerts[$0]) })
        }
        do {
            try store.save(changes)
        } catch {
            state.withLock { $0.unsaved.formUnion(changes.keys) }
            logger.warning("could not save the offline alerts; retrying", metadata: ["error": "\(error)"])
        }
    }
}
