import JSON
import ThingAgent

/// `thing-agent info DEVICE`: everything cached about one device.
enum InfoCommand: Command {
    static let spec = CommandSpec(
        name: "info",
        summary: "show a device's information, status, signal and properties from the cache",
        usage: "thing-agent info DEVICE [--json] [--fetch] [--timeout S] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print JSON (docs/protocol.md's field names)"),
            OptionSpec(name: "fetch", valueName: nil, help: "ask the device for fresh information first"),
            OptionSpec(name: "timeout", valueName: "S", help: "seconds to wait for --fetch (default 10)"),
        ] + CommonOptions.options,
        discussion: "An unknown device exits 1.\n\n" + ExitCode.table)

    /// Without `--fetch`: the device, its metadata and its upgrade from the cache file, on one connection.
    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode? {
        let (device, configuration) = try parse(arguments)
        guard !arguments.has("fetch") else { return nil }
        let reader = try openCache(configuration)
        guard let snapshot = try reader.device(device) else {
            throw CommandFailure(code: .failure, message: "unknown device '\(device)': it is not in the cache \(configuration.cache.database)")
        }
        show(snapshot, from: reader, json: arguments.has("json"))
        return .success
    }

    /// `--fetch`: the device's answer, with the metadata and upgrade the cache file has (none when it has none).
    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let (device, configuration) = try parse(arguments)
        let fetched = try await withRequests(configuration) { try await $0.fetch(device) }
        guard let fetched else {
            throw CommandFailure(code: .failure, message: "device \(device) is not in the cache")
        }
        show(fetched, from: try? CacheReader(path: configuration.cache.database), json: arguments.has("json"))
        return .success
    }

    private static func parse(_ arguments: ParsedArguments) throws -> (device: String, AgentConfiguration) {
        let device = try deviceArgument(arguments)
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        return (device, configuration)
    }

    private static func show(_ snapshot: DeviceSnapshot, from reader: CacheReader?, json: Bool) {
        let now = Timestamp.current
        // Local metadata (a cache file from before schema 3 has none; the daemon upgrades it).
        let metadata = reader.flatMap { try? $0.metadata(snapshot.id) }
        // The running or last firmware upgrade (none in a cache file from before schema 4).
        let upgrade = reader.flatMap { try? $0.upgrade(snapshot.id) } ?? nil
        if json {
            var object = snapshot.json(now: now, metadata: metadata)
            if let upgrade { object["upgrade"] = .object(upgrade.json) }
            Format.printJSON(.object(object))
        } else {
            Console.out(text(snapshot, now: now, metadata: metadata) + (upgrade.map { "\n" + upgradeLine($0, now: now) } ?? ""))
        }
    }

    static func upgradeLine(_ upgrade: OTAUpgrade, now: Millis) -> String {
        let state = switch upgrade.stage {
        case .failed: "failed (failedCode \(upgrade.failedCode.terminalSafe()))"
        case .succeeded: "succeeded"
        default: "\(upgrade.stage.rawValue) \(upgrade.progress)%, running"
        }
        return "  firmware upgrade \((upgrade.fromVersion ?? "?").terminalSafe()) → \(upgrade.image.version): \(state), started "
            + Format.age(upgrade.startedAt, now: now)
    }

    /// How the status is known, as `info` says it.
    static func evidence(_ presence: PresenceSource) -> String {
        switch presence {
        case .announced: "as the device announced"
        case .session: "as its gateway said (session)"
        case .traffic: "on the evidence of its own traffic"
        case .broker: "as the broker's client log said"
        }
    }

    static func text(_ device: DeviceSnapshot, now: Millis, metadata: DeviceMetadata? = nil) -> String {
        var lines = ["Device \(device.id)" + (device.displayName(metadata).map { "  \"\($0.terminalSafe())\"" } ?? "")]
        if let metadata, metadata.name != nil || metadata.room != nil || metadata.icon != nil || !metadata.offlineWarning {
            lines.append("  local            room \((metadata.room ?? "-").terminalSafe()), icon \((metadata.icon ?? "-").terminalSafe()), "
                + "offline warning \(metadata.offlineWarning ? "on" : "off")")
        }
        let status = device.online.map { $0 ? "online" : "offline" } ?? "unknown"
        let since = device.statusChangedAt.map { " since \(Format.date($0)) (\(Format.age($0, now: now)))" } ?? ""
        lines.append("  status           \(status)\(since)" + (device.presence.map { ", \(Self.evidence($0))" } ?? ""))
        if let wifi = device.wifiSignal {
            lines.append("  wifiSignal       \(wifi.dBm) dBm \(Format.bars(wifi.dBm)) \(Format.quality(wifi.dBm)), \(Format.age(wifi.time, now: now))")
        }
        if let rsrp = device.rsrp {
            lines.append("  rsrp             \(rsrp.dBm) dBm, \(Format.age(rsrp.time, now: now))")
        }
        for (key, value) in device.info.json where key != "devId" && key != "wifiSignal" && key != "rsrp" {
            guard !value.isNull else { continue }
            lines.append("  \(Format.label(key)) \(Format.value(value))")
        }
        if let transfer = device.transfer {
            lines.append("  transfer         \(transfer.status) from \(transfer.targetDeviceId ?? "?")"
                + (transfer.failedCode.isEmpty ? "" : " (\(transfer.failedCode.terminalSafe()))"))
        }
        if !device.events.isEmpty {
            lines.append("Events (the latest of each):")
            for (name, event) in device.events.sorted(by: { $0.key < $1.key }) {
                lines.append("  \(Format.label(name.terminalSafe())) \(Format.value(event.params))  (\(Format.age(event.time, now: now)))")
            }
        }
        lines.append("Properties:")
        if device.properties.isEmpty { lines.append("  (none reported)") }
        for code in device.properties.keys.sorted() {
            let property = device.properties[code]!
            lines.append("  \(Format.label(code.terminalSafe())) "
                + "\(Format.value(property.value))  (\(Format.age(property.time, now: now)))")
        }
        // Joined by hand, as CacheSchema.deviceColumnList says why.
        var text = ""
        for (index, line) in lines.enumerated() {
            if index > 0 { text += "\n" }
            text += line
        }
        return text
    }
}
