import FoundationEssentials
import JSON
import ThingAgent

/// `thing-agent ota DEVICE`: one firmware upgrade, started through the daemon and followed to the version the
/// device reports.
enum OTACommand: Command {
    static let spec = CommandSpec(
        name: "ota",
        summary: "upgrade a device's firmware and follow it until the device reports the new version",
        usage: """
            thing-agent ota DEVICE (--latest | --version V --url U --sha256 H [--size N]) [--timeout S] [options]
                   thing-agent ota --product P --latest [--group G] [--concurrency N] [--max-failures K] [--json]
            """,
        options: [
            OptionSpec(name: "latest", valueName: nil, help: "install the catalog's version for the device's product"),
            OptionSpec(name: "version", valueName: "V", help: "the version to install (with --url and --sha256)"),
            OptionSpec(name: "url", valueName: "U", help: "where the device downloads the image"),
            OptionSpec(name: "sha256", valueName: "H", help: "the image's SHA-256, 64 hex digits"),
            OptionSpec(name: "size", valueName: "N", help: "the image's size in bytes"),
            OptionSpec(name: "timeout", valueName: "S",
                       help: "give up waiting after S seconds without the new version (the upgrade goes on)"),
            OptionSpec(name: "product", valueName: "P", help: "roll out to every outdated device of product P"),
            OptionSpec(name: "group", valueName: "G", help: "with --product: only the devices of group G"),
            OptionSpec(name: "concurrency", valueName: "N", help: "with --product: upgrades at once (default 5)"),
            OptionSpec(name: "max-failures", valueName: "K",
                       help: "with --product: start no new upgrade once K failed (default 1)"),
            OptionSpec(name: "json", valueName: nil, help: "with --product: print the outcomes as a JSON array"),
            FirmwareCommand.catalogOption,
        ] + CommonOptions.options,
        discussion: """
            The daemon (thing-agent run) sends ota/start and tracks the upgrade in the cache, through the
            device's reboot and its own restarts; this command asks it to start and follows the stages:
            downloading, verifying, flashing, rebooting. Success is the device's own word: its next info
            report with the new firmwareVersion. With --latest, a device already at the catalog's version
            is left alone (exit 0, nothing sent).

            Exits 0 only when the device reports the new version; 1 when the upgrade failed (with its
            failedCode: download, verify, flash, rollback, or the device's own) or no daemon runs on the
            cache (also when none has held it for 15 s while following: the upgrade goes on at the device);
            3 when the catalog has no image for the device's product; 4 when the device refused (1003 bad
            data, 1006 busy, 1007 not applicable) or an upgrade of it is already in progress (one at a
            time per device); 5 when no progress came for otaStallTimeout
            seconds (default 300; recorded as failed with failedCode timeout) or --timeout passed;
            7 when the device is offline (nothing sent).

            A rollout (--product P --latest) upgrades every device of P (or of group G) that is behind the
            catalog, at most N at once; offline devices are skipped and listed. Once K upgrades failed (or
            were refused) no new one starts; those running are followed to their end. It ends with a table
            of every device's outcome and exits 0 only when every upgrade it started succeeded, else 1.

            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        if let product = arguments.value("product") { return try await rollout(arguments, product: product) }
        let deviceId = try deviceArgument(arguments)
        var configuration = try CommonOptions.configuration(arguments)
        let patience = try seconds(arguments)
        let explicitFlags = ["version", "url", "sha256", "size"].contains { arguments.value($0) != nil }
        guard arguments.has("latest") != explicitFlags else {
            throw CommandFailure(code: .usage, message: "give --latest or --version V --url U --sha256 H, one of them\n"
                                 + "Usage: \(spec.usage)")
        }
        let explicit = try explicitImage(arguments)
        let catalog = try FirmwareCommand.loadCatalog(arguments, &configuration)
        let reader = try openCache(configuration)
        guard let device = try reader.device(deviceId) else {
            throw CommandFailure(code: .failure, message: "unknown device '\(deviceId)'")
        }
        let image: FirmwareCatalog.Image
        if let explicit {
            image = explicit
        } else {
            guard let latest = catalog.latest(for: device.info.productId) else {
                throw CommandFailure(code: .invalid, message: """
                    the firmware catalog has no image for \(deviceId)'s product \
                    \(device.info.productId ?? "(none reported)")
                    """)
            }
            guard FirmwareVersion.isNewer(latest.version, than: device.info.firmwareVersion) else {
                Console.out("\(deviceId) already runs \((device.info.firmwareVersion ?? latest.version).terminalSafe()), "
                            + "the catalog's latest (\(latest.version)); nothing sent")
                return .success
            }
            image = latest
        }
        if device.online == false {
            throw CommandFailure(code: .offline, message: "\(deviceId) is offline; nothing sent")
        }
        guard case .daemon(let daemon) = try await writeAccess(configuration) else {
            throw CommandFailure(code: .failure, message: """
                firmware upgrades are started and tracked by the daemon (it follows the device through its \
                reboot); start it with 'thing-agent run' on \(configuration.cache.database)
                """)
        }
        var request = JSONObject([("device", .string(deviceId)), ("version", .string(image.version)),
                                  ("url", .string(image.url)), ("sha256", .string(image.sha256))])
        if let size = image.size { request["size"] = .integer(size) }
        let reports = await UpgradeReports.listen(configuration, device: deviceId, version: image.version)
        let started: JSONValue
        do {
            started = try await DaemonAPI(configuration: configuration, daemon: daemon).callWaitingForDevice("ota", request)
        } catch let refusal as DaemonAPI.Refusal {
            await reports?.stop()
            throw CommandFailure(code: exitCode(forAPI: refusal), message: refusal.message)
        } catch {
            await reports?.stop()
            throw error
        }
        let startedAt = started["startedAt"]?.int64Value ?? 0
        Console.out("\(deviceId): \((device.info.firmwareVersion ?? "unknown version").terminalSafe()) → \(image.version)")
        do {
            let code = try await follow(deviceId, startedAt: startedAt, reader: reader, reports: reports,
                                        patience: patience, stall: configuration.otaStallTimeout.seconds,
                                        daemon: DaemonPresence(cache: configuration.cache.database))
            await reports?.stop()
            return code
        } catch {
            await reports?.stop()
            throw error
        }
    }

    /// Follows the upgrade the daemon records in the cache until it ends, `patience` runs out or the daemon is
    /// gone (`daemon`: no daemon has held the cache for its grace; exit 1, as with no daemon at the start), showing
    /// the device's reports as they come.
    static func follow(_ deviceId: String, startedAt: Millis, reader: CacheReader, reports: UpgradeReports?,
                       patience: Double?, stall: Double, daemon: DaemonPresence) async throws -> ExitCode {
        var progress = UpgradeProgress()
        let deadline = patience.map { ContinuousClock.now + .seconds($0) }
        var daemon = daemon
        var nextDaemonCheck = ContinuousClock.now
        var last: OTAUpgrade?
        func showHeard() {
            guard let base = last else { return }
            for report in reports?.take() ?? [] where report.stage.isRunning {
                var shown = base
                shown.stage = report.stage
                shown.progress = report.progress
                progress.show(shown)
            }
        }
        while true {
            if let upgrade = try? reader.upgrade(deviceId), upgrade.startedAt >= startedAt {
                if last == nil { progress.show(upgrade) }
                last = upgrade
                if !upgrade.isRunning {
                    // The reports the daemon applied reach this command too: show them all before the end.
                    let settle = ContinuousClock.now + .seconds(10)
                    // Only when it heard the device's reports at all: a device of another dialect (Alink) reports
                    // on topics this command does not follow, and its progress reaches it through the file alone.
                    while let reports, reports.latest > 0, reports.latest < upgrade.reportTime,
                          ContinuousClock.now < settle {
                        try await Task.sleep(for: .milliseconds(20))
                    }
                    showHeard()
                    if upgrade.stage == .succeeded { await waitForReportedVersion(upgrade, reader: reader) }
                    progress.show(upgrade)
                    return try outcome(upgrade, stall: stall)
                }
                showHeard()
            }
            if let deadline, ContinuousClock.now >= deadline {
                progress.close()
                throw CommandFailure(code: .timeout, message: """
                    gave up waiting after \(Format.seconds(patience ?? 0)) s: \(deviceId) has not reported the new \
                    version; the upgrade may still be running (thing-agent info \(deviceId) shows it)
                    """)
            }
            if ContinuousClock.now >= nextDaemonCheck {
                nextDaemonCheck = ContinuousClock.now + .milliseconds(500)
                if daemon.isGone() {
                    progress.close()
                    throw CommandFailure(code: .failure, message: """
                        the daemon stopped: none has held the cache \(daemon.cache) for \
                        \(Format.seconds(daemon.grace.seconds)) s, and only the daemon tracks the upgrade of \
                        \(deviceId); the device goes on with it, and the daemon follows it again once it runs \
                        (thing-agent info \(deviceId) shows it)
                        """)
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The upgrade row is committed when the info report arrives, the device's row with the next batch (within
    /// `flushInterval`): waits (10 s at most) until the file shows the new version, so that `info` and `firmware`
    /// right after this command agree with it.
    static func waitForReportedVersion(_ upgrade: OTAUpgrade, reader: CacheReader) async {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let device = try? reader.device(upgrade.deviceId), device.info.firmwareVersion == upgrade.image.version {
                return
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    static func outcome(_ upgrade: OTAUpgrade, stall: Double) throws -> ExitCode {
        switch upgrade.stage {
        case .succeeded:
            return .success
        case .failed where upgrade.failedCode == "timeout":
            throw CommandFailure(code: .timeout, message: """
                the upgrade made no progress for \(Format.seconds(stall)) s and was ended as failed (failedCode timeout)
                """)
        default:
            throw CommandFailure(code: .failure, message: "the upgrade of \(upgrade.deviceId) to \(upgrade.image.version) "
                                 + "failed with failedCode \(upgrade.failedCode.terminalSafe())")
        }
    }

    /// The daemon API's codes for `ota` (Agent+OTA.swift) as exit codes; its 409 is an offline device, or an
    /// upgrade already in progress (refused, as the busy device itself would).
    static func exitCode(forAPI refusal: DaemonAPI.Refusal) -> ExitCode {
        switch refusal.code {
        case 400: .usage
        case 409: refusal.isDeviceOffline ? .offline : .refused
        case 422: .invalid
        case 424: .refused
        case 504: .timeout
        case 503: .noBroker
        default: .failure
        }
    }

    /// `--version V --url U --sha256 H [--size N]`, checked; nil when none of them is given.
    static func explicitImage(_ arguments: ParsedArguments) throws -> FirmwareCatalog.Image? {
        let given = ["version", "url", "sha256", "size"].filter { arguments.value($0) != nil }
        guard !given.isEmpty else { return nil }
        guard let version = arguments.value("version"), FirmwareCatalog.isVersion(version) else {
            throw CommandFailure(code: .usage, message: "--version needs dotted numbers such as 1.5.0, at most "
                                 + "\(InputBounds.maxFirmwareVersionBytes) bytes")
        }
        guard let url = arguments.value("url") else {
            throw CommandFailure(code: .usage, message: "--version needs --url U")
        }
        guard FirmwareCatalog.isURL(url) else {
            throw CommandFailure(code: .usage, message: "--url needs an address of 1 to \(InputBounds.maxFirmwareURLBytes) bytes")
        }
        guard let sha256 = arguments.value("sha256"), FirmwareCatalog.isSHA256(sha256) else {
            throw CommandFailure(code: .usage, message: "--sha256 needs 64 hexadecimal digits")
        }
        var size: Int64?
        if let text = arguments.value("size") {
            guard let n = Int64(text), n > 0 else {
                throw CommandFailure(code: .usage, message: "--size needs a positive number of bytes")
            }
            size = n
        }
        return FirmwareCatalog.Image(version: version, url: url, sha256: sha256, size: size)
    }
}
