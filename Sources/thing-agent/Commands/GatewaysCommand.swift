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
        // The cache file, read-only: no lock, no migration, nothing written.
        let reader = try openCache(configuration)
        guard let me = try reader.device(device) else {
            throw CommandFailure(code: .failure, message: "unknown device '\(device)': it is not in the cache \(configuration.cache.database)")
        }
        let fleet = try reader.devices()
        let candidates = GatewayTransferManager.gateways(replaceableBy: me, among: fleet)
        let subDeviceCount = { (gateway: String) in fleet.filter { $0.info.gatewayId == gateway }.count }
        let now = Timestamp.current
        if arguments.has("json") {
            Format.printJSON(.array(candidates.map { candidate in
                var object = candidate.json(now: now)
                object["subDeviceCount"] = .integer(Int64(subDeviceCount(candidate.id)))
                return .object(object)
            }))
            return .success
        }
        if !me.info.supports(.gatewayTransfer) {
            Console.error("note: \(device) does not list the gatewayTransfer ability, so it cannot replace these")
        }
        let product = me.info.productId ?? "?"
        let space = me.info.spaceId.map(String.init) ?? "?"
        Console.out("Gateways that \(device) can replace (product \(product), space \(space)), offline first:")
        let rows = candidates.map { candidate -> [String] in
            [candidate.id, candidate.info.name ?? "", candidate.online.map { $0 ? "online" : "offline" } ?? "unknown",
             String(subDeviceCount(candidate.id)), Format.age(candidate.updatedAt, now: now)]
        }
        Console.out(Format.table(["ID", "NAME", "STATUS", "SUB-DEVICES", "UPDATED"], rows))
        Console.out("\(candidates.count) gateway\(candidates.count == 1 ? "" : "s")")
        let transfer = me.transfer ?? .none(device)
        if transfer.status != .none {
            Console.out("Latest transfer of \(device): \(transfer.status) from \(transfer.targetDeviceId ?? "?")"
                + (transfer.failedCode.isEmpty ? "" : " (failedCode \(transfer.failedCode.terminalSafe()))"))
        }
        return .success
    }
}
