import JSON
import ThingAgent

/// `thing-agent wifi-scan DEVICE`: the Wi-Fi networks a device can see.
enum WifiScanCommand: Command {
    static let spec = CommandSpec(
        name: "wifi-scan",
        summary: "ask a device with the wifiList ability for the Wi-Fi networks it sees (strongest first)",
        usage: "thing-agent wifi-scan DEVICE [--json] [--timeout S] [--force] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print a JSON array"),
            OptionSpec(name: "timeout", valueName: "S", help: "seconds to wait for the answer (default 10)"),
            OptionSpec(name: "force", valueName: nil, help: "send even when the device is known to be offline"),
        ] + CommonOptions.options,
        discussion: """
            One line per SSID (the strongest access point or band), with its quality: excellent (-50 dBm and
            stronger), good (to -60), fair (to -70), weak (below). A device that is not cached or lacks the
            wifiList ability exits 1 with nothing sent.

            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        let force = arguments.has("force")
        let networks = try await withRequests(configuration) { try await $0.scanWifiList(device, force: force) }
        if arguments.has("json") {
            Format.printJSON(.array(networks.map { .object($0.json) }))
            return .success
        }
        let rows = networks.map { network -> [String] in
            [network.ssid, "\(network.rssi) dBm", Format.bars(network.rssi) + " " + network.quality.rawValue,
             network.securityName ?? ""]
        }
        Console.out(Format.table(["SSID", "SIGNAL", "QUALITY", "SECURITY"], rows))
        Console.out("\(networks.count) network\(networks.count == 1 ? "" : "s") seen by \(device)")
        return .success
    }
}
