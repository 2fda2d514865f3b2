import FoundationEssentials
import Glibc
import Platform
import ThingAgent

/// Shows a gateway transfer's way through its stages: a bar redrawn in place on a terminal, one plain line per
/// change otherwise (logs, pipes, tests).
struct TransferProgress {
    /// deviceConfigInit, deviceDataInit, osConfigInit, then finish.
    static let steps = 4
    let interactive: Bool
    private let started = ContinuousClock.now
    private var lastShown: TransferStatus?

    init(interactive: Bool = isatty(STDOUT_FILENO) == 1) {
        self.interactive = interactive
    }

    static func step(_ status: TransferStatus) -> Int {
        switch status {
        case .deviceConfigInit: 1
        case .deviceDataInit: 2
        case .osConfigInit: 3
        case .finish: 4
        case .unknown, .failed, .none: 0
        }
    }

    mutating func show(_ info: TransferInfo) {
        guard info.status != lastShown else { return }
        lastShown = info.status
        let elapsed = Int((ContinuousClock.now - started).components.seconds)
        let name = info.status == .unknown ? "accepted, waiting for the first report" : "\(info.status)"
        let failure = info.failedCode.isEmpty ? "" : " (failedCode \(info.failedCode))"
        let step = Self.step(info.status)
        if interactive {
            let width = 24
            let filled = width * step / Self.steps
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            write("\r\u{1B}[K[\(bar)] \(step)/\(Self.steps) \(name)\(failure)  \(elapsed) s")
            if info.status == .finish || info.status == .failed { write("\n") }
        } else {
            let position = step > 0 ? " (\(step)/\(Self.steps))" : ""
            write("\(name)\(position)\(failure) after \(elapsed) s\n")
        }
    }

    /// Ends a bar left open (the wait ended without a final status).
    func close() {
        if interactive, lastShown != .finish, lastShown != .failed { write("\n") }
    }

    private func write(_ text: String) {
        writeAll(text, to: STDOUT_FILENO)
    }
}
