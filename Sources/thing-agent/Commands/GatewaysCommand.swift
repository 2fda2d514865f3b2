import JSON
import ThingAgent

/// `thing-agent gateways DEVICE`: the gateways that DEVICE can replace, from the cache.
enum GatewaysCommand: Command {
    static let spec = CommandSpec(
        name: "gateways",
        summary: "list the gateways a gateway can replace (same product, same space; offline first)",
        usage: "thing-agent gateways DEVICE [--json] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print a JSON array (with subDeviceCount)"),
        ] + CommonOptions.options,
        discussion: "Reads the cache only. An unknown device exits 1.\n\n" + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        let configuration = try CommonOptions.configuration(arguments)
        _ = try openCache(configuration)
        // An observer that is never started: the cache file, read-only, behind the library's own API.
        let agent = try Agent(configuration: configuration, role: .observer)
        guard let me = agent.cache.device(device) else {
            throw CommandFailure(code: .failure, message: "unknown device '\(device)': it is not in the cache \(configuration.database)")
        }
        let manager = GatewayTransferManager(deviceId: device, agent: agent)
        let candidates = manager.gateways()
        let now = Timestamp.current
        if arguments.has("json") {
            Format.printJSON(.array(candidates.map { candidate in
                var object = candidate.json(now: now)
                object["subDeviceCount"] = .integer(Int64(agent.cache.subDevices(of: candidate.id).count))
                return .object(object)
            }))
            return .success
        }
        if !manager.deviceSupportsTransfer() {
            Console.error("note: \(device) does not list the gatewayTransfer ability, so it cannot replace these")
        }
        let product = me.info.productId ?? "?"
        let space = me.info.spaceId.map(String.init) ?? "?"
        Console.out("Gateways that \(device) can replace (product \(product), space \(space)), offline first:")
        let rows = candidates.map { candidate -> [String] in
            [candidate.id, candidate.info.name ?? "", candidate.online.map { $0 ? "online" : "offline" } ?? "unknown",
             String(agent.cache.subDevices(of: candidate.id).count), Format.age(candidate.updatedAt, now: now)]
        }
        Console.out(Format.table(["ID", "NAME", "STATUS", "SUB-DEVICES", "UPDATED"], rows))
        Console.out("\(candidates.count) gateway\(candidates.count == 1 ? "" : "s")")
        let transfer = manager.deviceTransferInfo()
        if transfer.status != .none {
            Console.out("Latest transfer of \(device): \(transfer.status) from \(transfer.targetDeviceId ?? "?")"
                + (transfer.failedCode.isEmpty ? "" : " (failedCode \(transfer.failedCode.terminalSafe()))"))
        }
        return .success
    }
}
