import JSON
import ThingAgent

/// `thing-agent firmware`: which devices run which firmware, and which are behind the catalog.
enum FirmwareCommand: Command {
    static let spec = CommandSpec(
        name: "firmware",
        summary: "firmware inventory: devices per product and version, and those behind the catalog",
        usage: "thing-agent firmware [--product P] [--outdated] [--json] [--catalog FILE] [options]",
        options: [
            OptionSpec(name: "product", valueName: "P", help: "only the devices of product P"),
            OptionSpec(name: "outdated", valueName: nil,
                       help: "list the devices behind the catalog (offline ones included, marked offline)"),
            OptionSpec(name: "json", valueName: nil, help: "print a JSON object {products, outdated}"),
            catalogOption,
        ] + CommonOptions.options,
        discussion: """
            Reads the cache and the firmware catalog (firmwareCatalog in the config, or --catalog). Each
            line counts the devices of one product that report one firmwareVersion, online and offline;
            LATEST is the catalog's version and BEHIND says whether it is newer. Versions compare as
            dotted numbers (1.10.0 is newer than 1.9.3; 2.0.0-rc1 is older than 2.0.0).

            """ + ExitCode.table)

    static var catalogOption: OptionSpec {
        OptionSpec(name: "catalog", valueName: "FILE", help: "firmware catalog (default: firmwareCatalog)")
    }

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        var configuration = try CommonOptions.configuration(arguments)
        let catalog = try loadCatalog(arguments, &configuration)
        let devices = try openCache(configuration).devices()
        let inventory = FirmwareInventory(devices: devices, catalog: catalog, product: arguments.value("product"))
        if arguments.has("json") {
            var object = inventory.json
            if !arguments.has("outdated") { object["outdated"] = nil }
            Format.printJSON(.object(object))
            return .success
        }
        if arguments.has("outdated") {
            let rows = inventory.outdated.map { device in
                [device.deviceId, device.productId, device.version ?? "-", device.latest,
                 device.online.map { $0 ? "online" : "offline" } ?? "unknown"]
            }
            print(Format.table(["ID", "PRODUCT", "VERSION", "LATEST", "STATUS"], rows))
            print("\(rows.count) device\(rows.count == 1 ? "" : "s") behind the catalog")
            return .success
        }
        let rows = inventory.rows.map { row in
            [row.productId ?? "-", row.version ?? "-", String(row.devices), String(row.online),
             String(row.offline + row.unknown), row.latest ?? "-", row.outdated ? "yes" : ""]
        }
        print(Format.table(["PRODUCT", "VERSION", "DEVICES", "ONLINE", "OFFLINE", "LATEST", "BEHIND"], rows))
        let total = inventory.rows.reduce(0) { $0 + $1.devices }
        print("\(total) device\(total == 1 ? "" : "s"), \(inventory.outdated.count) behind the catalog")
        return .success
    }

    /// The catalog named by `--catalog` or `firmwareCatalog` (an empty one when neither names a file); a file that
    /// does not read cleanly is an error that names it.
    static func loadCatalog(_ arguments: ParsedArguments, _ configuration: inout AgentConfiguration) throws
        -> FirmwareCatalog {
        if let file = arguments.value("catalog") { configuration.firmwareCatalog = file }
        guard let file = configuration.firmwareCatalog else { return FirmwareCatalog() }
        do {
            return try FirmwareCatalog(file: file)
        } catch {
            throw CommandFailure(code: .failure, message: error.description)
        }
    }
}
