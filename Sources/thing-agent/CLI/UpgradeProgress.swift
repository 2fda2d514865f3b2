import FoundationEssentials
import Glibc
import Platform
import ThingAgent

/// Shows a firmware upgrade's way through its stages: a bar redrawn in place on a terminal, one plain line per
/// change otherwise (logs, pipes, tests).
struct UpgradeProgress {
    let interactive: Bool
    private let started = ContinuousClock.now
    private var lastShown: (OTAStage, Int)?

    init(interactive: Bool = isatty(STDOUT_FILENO) == 1) {
        self.interactive = interactive
    }

    /// Overall share done: downloading fills the first half, each later stage a sixth more.
    static func percent(_ upgrade: OTAUpgrade) -> Int {
        switch upgrade.stage {
        case .accepted: 0
        case .downloading: upgrade.progress / 2
        case .verifying: 50 + upgrade.progress / 6
        case .flashing: 67 + upgrade.progress / 6
        case .rebooting: 84 + upgrade.progress / 7
        case .succeeded: 100
        case .failed: 0
        }
    }

    /// The bar's filled cells, 0...width. The progress comes from the device: clamped, so that no value it sends
    /// can make the bar trap.
    static func filledCells(_ upgrade: OTAUpgrade, width: Int) -> Int {
        width * min(max(percent(upgrade), 0), 100) / 100
    }

    mutating func show(_ upgrade: OTAUpgrade) {
        if let last = lastShown, last == (upgrade.stage, upgrade.progress) { return }
        lastShown = (upgrade.stage, upgrade.progress)
        let elapsed = Int((ContinuousClock.now - started).components.seconds)
        let name = switch upgrade.stage {
        case .accepted: "accepted, waiting for the first report"
        case .succeeded: "succeeded: \(upgrade.deviceId) reports \(upgrade.image.version.terminalSafe())"
        case .failed: "failed (failedCode \(upgrade.failedCode.terminalSafe()))"
        default: "\(upgrade.stage.rawValue) \(upgrade.progress)%"
        }
        if interactive {
            let width = 24
            let filled = Self.filledCells(upgrade, width: width)
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            write("\r\u{1B}[K[\(bar)] \(name)  \(elapsed) s")
            if !upgrade.isRunning { write("\n") }
        } else {
            write("\(name) after \(elapsed) s\n")
        }
    }

    /// Ends a bar left open (the wait ended before the upgrade did).
    func close() {
        if interactive, lastShown.map({ $0.0.isRunning }) ?? false { write("\n") }
    }

    private func write(_ text: String) {
        writeAll(text, to: STDOUT_FILENO)
    }
}
