import FoundationEssentials
import JSON
import ThingAgent

/// `thing-agent ota --product P --latest`: a staged rollout of the catalog's version to every outdated device of a
/// product (or of a group), a few at a time, stopping once too many failed.
struct OTARollout {
    let configuration: AgentConfiguration
    let daemon: String
    let image: FirmwareCatalog.Image
    let concurrency: Int
    let maxFailures: Int
    /// Seconds each upgrade may take from its start (`--timeout`); nil: until it ends.
    let patience: Double?

    /// How one device's part of the rollout ended.
    struct Outcome: Sendable {
        var deviceId: String
        var from: String?
        /// succeeded, failed, refused, timeout, skipped (offline), not started.
        var result: String
        var detail: String

        var json: JSONValue {
            .object(JSONObject([("devId", .string(deviceId)), ("from", from.map(JSONValue.string) ?? .null),
                                ("result", .string(result)), ("detail", .string(detail))]))
        }
    }

    /// Runs the rollout over `candidates` (outdated and online); returns one outcome per candidate, in the order
    /// they ended, then those never started.
    func run(_ candidates: [DeviceSnapshot], reader: CacheReader, quiet: Bool) async throws -> [Outcome] {
        var pending = candidates
        var running: [String: (startedAt: Millis, from: String?, clock: ContinuousClock.Instant)] = [:]
        var outcomes: [Outcome] = []
        var notStarted: [Outcome] = []
        var failures = 0
        func ended(_ outcome: Outcome) {
            outcomes.append(outcome)
            if outcome.result != "succeeded" { failures += 1 }
            if !quiet {
                Console.out("\(outcome.deviceId)  \(outcome.result)\(outcome.detail.isEmpty ? "" : "  \(outcome.detail)")")
            }
        }
        while !pending.isEmpty || !running.isEmpty {
            while running.count < concurrency, failures < maxFailures, !pending.isEmpty {
                let device = pending.removeFirst()
                let from = device.info.firmwareVersion
                do {
                    let started = try await DaemonAPI(configuration: configuration, daemon: daemon)
                        .callWaitingForDevice("ota", request(for: device.id))
                    running[device.id] = (started["startedAt"]?.int64Value ?? 0, from, .now)
                    if !quiet { Console.out("\(device.id)  started (\((from ?? "?").terminalSafe()) → \(image.version))") }
                } catch let refusal as DaemonAPI.Refusal where refusal.code == 429 {
                    // The daemon's rate limit, still refusing after the client's retries: the daemon is busy, the
                    // device did nothing wrong. Listed as not started, and no failure of the rollout.
                    notStarted.append(Outcome(deviceId: device.id, from: from, result: "not started",
                                              detail: "the daemon is busy: \(refusal.message)".terminalSafe()))
                } catch let refusal as DaemonAPI.Refusal {
                    ended(Outcome(deviceId: device.id, from: from, result: refusal.isDeviceOffline ? "offline" : "refused",
                                  detail: refusal.message.terminalSafe()))
                } catch {
                    // No answer in time, or the broker went away: the rollout goes on and lists it (the daemon may
                    // still start it once the request reaches it; `info` then shows it).
                    ended(Outcome(deviceId: device.id, from: from, result: "timeout",
                                  detail: "\(error)".terminalSafe()))
                }
            }
            for (id, upgrade) in running.sorted(by: { $0.key < $1.key }) {
                let row = try? reader.upgrade(id)
                if row == nil, Self.isRemoved(id, reader) {
                    // Removed meanwhile: its upgrade row went with it, and nothing will end it.
                    running[id] = nil
                    ended(Outcome(deviceId: id, from: upgrade.from, result: "failed", detail: "the device was removed"))
                } else if let row, row.startedAt >= upgrade.startedAt, !row.isRunning {
                    running[id] = nil
                    if row.stage == .succeeded { await OTACommand.waitForReportedVersion(row, reader: reader) }
                    ended(Outcome(deviceId: id, from: upgrade.from, result: row.stage == .succeeded ? "succeeded"
                                      : row.failedCode == "timeout" ? "timeout" : "failed",
                                  detail: row.stage == .succeeded ? "reports \(row.image.version)"
                                      : "failedCode \(row.failedCode.terminalSafe())"))
                } else if let patience, ContinuousClock.now - upgrade.clock > .seconds(patience) {
                    running[id] = nil
                    ended(Outcome(deviceId: id, from: upgrade.from, result: "timeout",
                                  detail: "no new version within \(Format.seconds(patience)) s"))
                }
            }
            if failures >= maxFailures, !pending.isEmpty {
                for device in pending {
                    notStarted.append(Outcome(deviceId: device.id, from: device.info.firmwareVersion, result: "not started",
                                            detail: "the rollout stopped after \(failures) failure\(failures == 1 ? "" : "s")"))
                }
                pending = []
            }
            if !running.isEmpty { try await Task.sleep(for: .milliseconds(200)) }
        }
        return outcomes + notStarted
    }

    /// True only when the cache says the device is gone (a failed read is not a removal).
    private static func isRemoved(_ id: String, _ reader: CacheReader) -> Bool {
        do { return try reader.device(id) == nil } catch { return false }
    }

    private func request(for device: String) -> JSONObject {
        var request = JSONObject([("device", .string(device)), ("version", .string(image.version)),
                                  ("url", .string(image.url)), ("sha256", .string(image.sha256))])
        if let size = image.size { request["size"] = .integer(size) }
        return request
    }
}

extension OTACommand {
    /// The rollout form of the command: `--product P --latest [--group G] [--concurrency N] [--max-failures K]`.
    static func rollout(_ arguments: ParsedArguments, product: String) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "give DEVICE or --product P, not both")
        }
        guard arguments.has("latest"), arguments.value("version") == nil else {
            throw CommandFailure(code: .usage, message: "a rollout installs the catalog's version: --product P --latest")
        }
        func count(_ name: String, default value: Int) throws -> Int {
            guard let text = arguments.value(name) else { return value }
            guard let n = Int(text), (1...1000).contains(n) else {
                throw CommandFailure(code: .usage, message: "--\(name) needs a whole number from 1 to 1000")
            }
            return n
        }
        let concurrency = try count("concurrency", default: 5)
        let maxFailures = try count("max-failures", default: 1)
        var configuration = try CommonOptions.configuration(arguments)
        let patience = try seconds(arguments)
        let catalog = try FirmwareCommand.loadCatalog(arguments, &configuration)
        guard let image = catalog.latest(for: product) else {
            throw CommandFailure(code: .invalid, message: "the firmware catalog has no image for product \(product)")
        }
        let reader = try openCache(configuration)
        var devices = try reader.devices().filter { $0.info.productId == product }
        if let group = arguments.value("group") {
            guard let members = try readLocal(configuration).groups().first(where: { $0.name == group })?.devices else {
                throw CommandFailure(code: .failure, message: "unknown group '\(group)'")
            }
            devices = devices.filter { members.contains($0.id) }
        }
        let outdated = devices.filter { FirmwareVersion.isNewer(image.version, than: $0.info.firmwareVersion) }
        let offline = outdated.filter { $0.online == false }
        let candidates = outdated.filter { $0.online != false }
        let json = arguments.has("json")
        if !json {
            Console.out("rollout of \(product) \(image.version): \(outdated.count) of \(devices.count) devices behind, "
                        + "\(offline.count) offline (skipped); at most \(concurrency) at once, stopping after "
                        + "\(maxFailures) failure\(maxFailures == 1 ? "" : "s")")
        }
        var outcomes: [OTARollout.Outcome] = []
        if !candidates.isEmpty {
            guard case .daemon(let daemon) = try await writeAccess(configuration) else {
                throw CommandFailure(code: .failure, message: "firmware upgrades are started and tracked by the daemon; "
                                     + "start it with 'thing-agent run' on \(configuration.cache.database)")
            }
            let rollout = OTARollout(configuration: configuration, daemon: daemon, image: image,
                                     concurrency: concurrency, maxFailures: maxFailures, patience: patience)
            outcomes = try await rollout.run(candidates, reader: reader, quiet: json)
        }
        outcomes += offline.map { OTARollout.Outcome(deviceId: $0.id, from: $0.info.firmwareVersion,
                                                     result: "skipped", detail: "offline") }
        if json {
            Format.printJSON(.array(outcomes.map(\.json)))
        } else {
            print(Format.table(["DEVICE", "FROM", "TO", "RESULT", "DETAIL"], outcomes.map { outcome in
                [outcome.deviceId, outcome.from ?? "-", image.version, outcome.result, outcome.detail]
            }))
            let succeeded = outcomes.filter { $0.result == "succeeded" }.count
            let started = outcomes.filter { !["skipped", "not started", "offline"].contains($0.result) }.count
            print("\(succeeded) of \(started) started upgrade\(started == 1 ? "" : "s") succeeded")
        }
        let allStartedSucceeded = outcomes.allSatisfy { ["succeeded", "skipped"].contains($0.result) }
        return allStartedSucceeded ? .success : .failure
    }
}
