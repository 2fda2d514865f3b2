import JSON
import ThingAgent

/// `thing-agent devices`: the cached fleet, one line a device.
enum DevicesCommand: Command {
    static let spec = CommandSpec(
        name: "devices",
        summary: "list the cached devices",
        usage: "thing-agent devices [--json] [--offline] [--gateway ID] [--room R] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print a JSON array"),
            OptionSpec(name: "offline", valueName: nil, help: "only devices known to be offline"),
            OptionSpec(name: "gateway", valueName: "ID", help: "only the sub-devices of gateway ID"),
            OptionSpec(name: "room", valueName: "R", help: "only the devices in room R (as set by edit --room; exact match)"),
        ] + CommonOptions.options)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        try list(arguments)
    }

    /// It only reads the cache file: no async runtime needed.
    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode? {
        try list(arguments)
    }

    private static func list(_ arguments: ParsedArguments) throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        let configuration = try CommonOptions.configuration(arguments)
        let reader = try openCache(configuration)
        let room = arguments.value("room")
        if room?.isEmpty == true { throw CommandFailure(code: .usage, message: "--room needs a room name") }
        // Local names, rooms, icons (none in a cache file from before schema 3).
        let metadata = { (try? reader.allMetadata()) ?? [:] }
        if arguments.has("json") {
            var devices = try reader.devices()
            if arguments.has("offline") { devices = devices.filter { $0.online == false } }
            if let gateway = arguments.value("gateway") { devices = devices.filter { $0.info.gatewayId == gateway } }
            let metadata = metadata()
            if let room { devices = devices.filter { metadata[$0.id]?.room == room } }
            let now = Timestamp.current
            Format.printJSON(.array(devices.map { .object($0.json(now: now, metadata: metadata[$0.id])) }))
            return .success
        }
        // The table needs eight columns, not whole snapshots.
        var devices = try reader.listings()
        if arguments.has("offline") { devices = devices.filter { $0.online == false } }
        if let gateway = arguments.value("gateway") { devices = devices.filter { $0.gatewayId == gateway } }
        let local = metadata()
        if let room { devices = devices.filter { local[$0.id]?.room == room } }
        let now = Timestamp.current
        var cells: [String] = []
        cells.reserveCapacity(devices.count * 8)
        for device in devices {
            cells.append(device.id)
            cells.append(local[device.id]?.name ?? device.name ?? "")
            cells.append(local[device.id]?.room ?? "")
            cells.append(device.category?.rawValue ?? "")
            cells.append(device.online.map { $0 ? "online" : "offline" } ?? "unknown")
            cells.append(device.wifiSignal.map { "\($0) dBm" } ?? "")
            cells.append(String(device.propertyCount))
            cells.append(Format.age(device.updatedAt, now: now))
        }
        Console.out(escaped: Format.table(["ID", "NAME", "ROOM", "CATEGORY", "STATUS", "WIFI", "PROPS", "UPDATED"], cells: cells))
        Console.out("\(devices.count) device\(devices.count == 1 ? "" : "s")")
        return .success
    }
}
