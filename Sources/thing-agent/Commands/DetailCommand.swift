import FoundationEssentials
import JSON
import ThingAgent

/// `thing-agent detail DEVICE`: the device-detail page, sections and items in config order.
enum DetailCommand: Command {
    static let spec = CommandSpec(
        name: "detail",
        summary: "show a device's detail page (sections of deviceDetailConfig.json, each item with its data)",
        usage: "thing-agent detail DEVICE [--json] [--detail-config FILE] [--timeout S] | detail --group G [--json] [options]",
        options: [
            OptionSpec(name: "json", valueName: nil, help: "print JSON: {device, sections:[{name, header, margin, items}]}"),
            OptionSpec(name: "detail-config", valueName: "FILE", help: "layout file (default: detailConfig, else built in)"),
            OptionSpec(name: "timeout", valueName: "S", help: "seconds the live network check waits (default 10)"),
            groupOption,
        ] + CommonOptions.options,
        discussion: """
            Reads the cache file; check_device_network makes a live info/get round trip through the broker (the
            item says 'failed' when there is no broker or the device does not answer). While the daemon runs, it
            composes the page (its API's detail method, with this layout) and makes the round trip. Cells only a phone can
            serve are listed as notAvailableHere; cell types with no built-in and no provider as unknownCellType.
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        if let group = arguments.value("group") {
            guard arguments.positionals.isEmpty else {
                throw CommandFailure(code: .usage, message: "--group G takes no DEVICE\nUsage: \(spec.usage)")
            }
            return try runForGroup(group, arguments)
        }
        let device = try deviceArgument(arguments)
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        if let file = arguments.value("detail-config") { configuration.detailConfig = file }
        _ = try requireKnown(device, configuration)
        let layout = try configuration.detailConfig.map { try detailLayout($0) }
        let detail: DeviceDetail
        let opened: DeviceRequests
        do {
            opened = try await DeviceRequests.open(configuration, command: spec.name)
        } catch let failure as CommandFailure {
            // No daemon, and the cache cannot be taken for writing (another command holds it, or this user may only
            // read the file): the page is still shown from the file, read-only, the live check failing.
            guard let page = try? await DeviceRequests.readOnlyDetail(device, configuration) else { throw failure }
            Console.error("\(failure.message); the page is read from the file, with no live check")
            return show(page, arguments)
        }
        let requests = opened
        detail = try await requests.closing {
            // Without a broker the page is still shown; only the live check fails.
            let connected = (try? await requests.connect()) != nil
            return try await requests.detail(device, layout: layout, connected: connected)
        }
        return show(detail, arguments)
    }

    private static func show(_ detail: DeviceDetail, _ arguments: ParsedArguments) -> ExitCode {
        if arguments.has("json") {
            Format.printJSON(.object(detail.json))
        } else {
            Console.out(text(detail))
        }
        return .success
    }

    /// The layout file as JSON, checked as the daemon checks it (a bad file exits 1 naming it).
    static func detailLayout(_ file: String) throws -> JSONValue {
        do {
            _ = try DetailConfig(file: file)
            return try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        } catch {
            throw CommandFailure(code: .failure, message: "\(error)")
        }
    }

    static func text(_ detail: DeviceDetail) -> String {
        var lines = ["Device \(detail.deviceId)"]
        for section in detail.sections {
            let title = section.header?["title"]?.stringValue ?? section.header?["cellType"]?.stringValue
            lines.append("[\(section.name.terminalSafe())]" + (title.map { " \($0.terminalSafe())" } ?? ""))
            for item in section.items {
                // Whole when longer than the column (a cut cell type could read as another one).
                var line = "  " + item.cellType.padded(from: item.cellType.terminalWidth, to: 33) + " "
                if item.status != .ok { line += "(\(item.status.rawValue)) " }
                if let data = item.data { line += data.serialized() + " " }
                if let message = item.message { line += "- \(message.terminalSafe())" }
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }
}
