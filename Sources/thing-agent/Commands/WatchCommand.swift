import FoundationEssentials
import Glibc
import Platform
import Synchronization
import ThingAgent

/// `thing-agent watch`: a live view of the fleet in the terminal.
enum WatchCommand: Command {
    static let spec = CommandSpec(
        name: "watch",
        summary: "live view of the fleet: status, signal bars, last change (q or Ctrl-C leaves)",
        usage: "thing-agent watch [options]",
        options: CommonOptions.options,
        discussion: """
            Follows the device topics itself (it writes nothing), starting from the cache when there is one.
            When stdout is not a terminal it prints one line per change instead.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let configuration = try CommonOptions.configuration(arguments)
        let agent = try await startObserver(configuration)
        let interactive = isatty(STDOUT_FILENO) == 1 && isatty(STDIN_FILENO) == 1
        let screen = interactive ? TerminalScreen() : nil
        let updates = agent.events.events()
        let done = Task {
            if let screen {
                await screen.run(agent: agent, updates: updates, broker: configuration.mqtt.broker)
            } else {
                // A reader that goes away (`watch | head`) ends the command instead of crashing it.
                for await event in updates {
                    guard writeAll(describe(event) + "\n", to: STDOUT_FILENO) else { break }
                }
            }
        }
        let signals = SignalWatcher([SIGINT, SIGTERM]) { _ in done.cancel() }
        await done.value
        signals.cancel()
        await agent.stop()
        return .success
    }

    static func describe(_ event: DeviceEvent) -> String {
        switch event {
        case .propertiesChanged(let id, let changes):
            "\(id) properties " + changes.map { "\($0.code.terminalSafe())=\(Format.value($0.value))" }.joined(separator: " ")
        case .statusChanged(let id, let online, _): "\(id) \(online ? "online" : "offline")"
        case .signalUpdated(let id, let wifi, let rsrp):
            "\(id) signal" + (wifi.map { " wifi \($0.dBm) dBm" } ?? "") + (rsrp.map { " rsrp \($0.dBm) dBm" } ?? "")
        case .infoChanged(let id, let info): "\(id) info \((info.name ?? "").terminalSafe())"
        case .transferStatusChanged(let id, let info): "\(id) transfer \(info.status)"
        case .offlineWarning(let id, _): "\(id) offline warning"
        case .backOnline(let id, _, let away): "\(id) back online after \(away / 1000) s"
        case .upgradeChanged(let id, let upgrade):
            "\(id) firmware \(upgrade.image.version) \(upgrade.stage.rawValue) \(upgrade.progress)%"
        case .linkPropagated(let id, let propagation):
            "\(id) link \(propagation.link.terminalSafe()) \(propagation.code.terminalSafe())=\(Format.value(propagation.value))"
        case .activated(let id, _, let gateway): "\(id) activated" + (gateway.map { " by gateway \($0)" } ?? "")
        case .eventReported(let id, let event):
            "\(id) event \(event.name) \(Format.value(event.params))"
        case .commandRefused(let id, let refusal):
            "\(id) \(refusal.source) command \(refusal.outcome): \(refusal.message.terminalSafe())"
        }
    }
}

/// The full-screen view: alternate screen, raw keyboard, redrawn at most a few times a second.
final class TerminalScreen: Sendable {
    func run(agent: Agent, updates: DeviceEventStream, broker: String) async {
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        write("\u{1B}[?1049h\u{1B}[?25l")
        defer {
            write("\u{1B}[?25h\u{1B}[?1049l")
            var restore = saved
            tcsetattr(STDIN_FILENO, TCSANOW, &restore)
        }
        let quit = QuitKey()
        let lastEvent = LastEvents()
        let follower = Task {
            for await event in updates { lastEvent.note(event) }
        }
        defer { follower.cancel() }
        while !Task.isCancelled, !quit.pressed {
            render(agent: agent, broker: broker, last: lastEvent)
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    private func render(agent: Agent, broker: String, last: LastEvents) {
        let now = Timestamp.current
        let devices = agent.cache.all().sorted { $0.updatedAt > $1.updatedAt }
        let online = devices.filter { $0.online == true }.count
        var size = winsize()
        _ = ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size)
        let height = max(5, Int(size.ws_row == 0 ? 24 : size.ws_row))
        let width = max(40, Int(size.ws_col == 0 ? 100 : size.ws_col))
        let state = "\(agent.connectionState)"
        var lines = [
            "thing-agent watch  \(broker)  [\(state)]  \(devices.count) devices, \(online) online   q: quit",
            "",
        ]
        let rows = devices.prefix(height - 4).map { device -> [String] in
            [device.id, device.info.name ?? "",
             device.online.map { $0 ? "● online" : "○ offline" } ?? "? unknown",
             Format.bars(device.wifiSignal?.dBm) + (device.wifiSignal.map { " \($0.dBm)" } ?? ""),
             Format.age(device.updatedAt, now: now), last.summary(device.id)]
        }
        lines += Format.table(["DEVICE", "NAME", "STATUS", "SIGNAL", "CHANGED", "LAST"], rows)
            .split(separator: "\n").map(String.init)
        let text = lines.map { String($0.prefix(width)) }.joined(separator: "\u{1B}[K\n")
        write("\u{1B}[H" + text + "\u{1B}[K\n\u{1B}[J")
    }

    private func write(_ text: String) {
        writeAll(text, to: STDOUT_FILENO)
    }

}

/// Reads the keyboard on a thread of its own (a blocking read) and remembers when `q` was pressed.
final class QuitKey: Sendable {
    private let flag = Atomic<Bool>(false)

    init() {
        startDetachedThread(name: "quit-key") { [flag = self] in
            var byte: UInt8 = 0
            while read(STDIN_FILENO, &byte, 1) == 1 {
                if byte == UInt8(ascii: "q") || byte == UInt8(ascii: "Q") || byte == 3 { break }
            }
            flag.flag.store(true, ordering: .relaxed)
        }
    }

    var pressed: Bool { flag.load(ordering: .relaxed) }
}

/// The latest event per device, summarised for the LAST column.
final class LastEvents: Sendable {
    private let table = Mutex<[String: String]>([:])

    func note(_ event: DeviceEvent) {
        let text = WatchCommand.describe(event).split(separator: " ", maxSplits: 1).last.map(String.init) ?? ""
        table.withLock { $0[event.deviceId] = text }
    }

    func summary(_ device: String) -> String {
        table.withLock { $0[device] ?? "" }
    }
}

