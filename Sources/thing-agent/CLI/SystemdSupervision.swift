import FoundationEssentials
import Synchronization
import ThingAgent

/// The daemon's side of `Type=notify` (systemd.service(5)): READY=1 once the cache is loaded and the subscriptions
/// are acknowledged, STATUS= lines while it runs, STOPPING=1 when it stops, and WATCHDOG=1 every half
/// `$WATCHDOG_USEC` while the receive path and the flusher are alive. Does nothing outside systemd.
final class SystemdSupervision: Sendable {
    let notifier: SystemdNotifier
    private let logger: AgentLogger
    private let stopped = Atomic<Bool>(false)
    /// How often STATUS= is refreshed (only sent when it changed).
    private static let statusInterval: Duration = .seconds(5)
    /// A thread that has not gone round its loop for this long (or one watchdog interval, if longer) is stuck.
    private static let stuckAfter: Duration = .seconds(5)

    init(notifier: SystemdNotifier = SystemdNotifier(), logger: AgentLogger) {
        self.notifier = notifier
        self.logger = logger
    }

    func status(_ text: String) {
        notifier.notify("STATUS=\(text)")
    }

    /// The agent is up: tells systemd, then keeps STATUS= and the watchdog going until the task is cancelled.
    func ready(_ agent: Agent) async {
        guard notifier.isEnabled else { return }
        notifier.notify("READY=1\nSTATUS=\(agent.statusLine)")
        await withDiscardingTaskGroup { group in
            group.addTask { await self.refreshStatus(agent) }
            if let interval = notifier.watchdogInterval {
                group.addTask { await self.feedWatchdog(agent, every: interval) }
            }
        }
    }

    /// Said once, at the first of a signal or the end of the run.
    func stopping() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        notifier.notify("STOPPING=1\nSTATUS=stopping")
    }

    private func refreshStatus(_ agent: Agent) async {
        var last = agent.statusLine
        while (try? await Task.sleep(for: Self.statusInterval)) != nil {
            let line = agent.statusLine
            if line != last { status(line) }
            last = line
        }
    }

    private func feedWatchdog(_ agent: Agent, every interval: Duration) async {
        let limit = max(interval, Self.stuckAfter)
        var complained = false
        repeat {
            if agent.isAlive(within: limit) {
                notifier.notify("WATCHDOG=1")
                complained = false
            } else if !complained {
                complained = true
                logger.error("the receive path or the flusher is stuck; the watchdog is no longer fed")
            }
        } while (try? await Task.sleep(for: interval)) != nil
    }
}
