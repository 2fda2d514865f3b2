import JSON
import ThingAgentCore

extension Agent {
    /// The device's running or latest firmware upgrade, as the daemon tracks it.
    public func upgrade(_ deviceId: String) -> OTAUpgrade? {
        writer.upgrades.upgrade(deviceId)
    }

    /// The firmware upgrades still running.
    public var runningUpgrades: [OTAUpgrade] { writer.upgrades.running }

    /// The inventory of the cached fleet against the firmware catalog.
    public func firmwareInventory(product: String? = nil) -> FirmwareInventory {
        FirmwareInventory(devices: cache.all(), catalog: firmwareCatalog, product: product)
    }

    /// Asks `deviceId` to install `image` (`ota/start`) and, once it accepts, records the upgrade (stage
    /// `accepted`), which the daemon then follows to its end: the device's info report with the target version
    /// (success), a `failed` progress report, the old version after a reboot (`rollback`), or no progress for
    /// `otaStallTimeout` (`timeout`). Only the daemon (`.service`) tracks upgrades.
    /// An upgrade already in progress is not replaced (`.unsupported`, nothing sent): its record would be lost,
    /// and the device, busy, would refuse anyway.
    public func startUpgrade(_ deviceId: String, image: FirmwareCatalog.Image,
                             timeout: Duration? = nil) async throws(RequestError) -> OTAUpgrade {
        do {
            return try await startUpgradeUnlessRunning(deviceId, image: image, timeout: timeout)
        } catch {
            switch error {
            case .request(let error): throw error
            case .inProgress: throw .unsupported(deviceId: deviceId, reason: error.reason)
            }
        }
    }

    /// Why a start did not happen: the device request's error, or an upgrade of the device still in progress.
    enum UpgradeStartFailure: Error, CustomStringConvertible {
        case request(RequestError)
        case inProgress(OTAUpgrade)

        var reason: String {
            switch self {
            case .request(let error): "\(error)"
            case .inProgress(let running):
                "an upgrade to \(running.image.version) is already in progress (stage \(running.stage.rawValue)); "
                    + "a new one can start once it has ended (or otaStallTimeout ends it, should the device fall silent)"
            }
        }

        var description: String {
            if case .inProgress(let running) = self { "device \(running.deviceId): \(reason)" } else { reason }
        }
    }

    /// `startUpgrade`, telling an upgrade in progress apart (the API answers it 409).
    func startUpgradeUnlessRunning(_ deviceId: String, image: FirmwareCatalog.Image,
                                   timeout: Duration?) async throws(UpgradeStartFailure) -> OTAUpgrade {
        do {
            return try await recordAndSendUpgrade(deviceId, image: image, timeout: timeout)
        } catch let error as UpgradeStartFailure {
            throw error
        } catch let error as RequestError {
            throw .request(error)
        } catch {
            throw .request(.notSent(reason: "\(error)"))
        }
    }

    private func recordAndSendUpgrade(_ deviceId: String, image: FirmwareCatalog.Image,
                                      timeout: Duration?) async throws -> OTAUpgrade {
        guard role.writesCache else {
            throw RequestError.unsupported(deviceId: deviceId,
                                           reason: "firmware upgrades are tracked by the daemon (thing-agent run)")
        }
        var data = JSONObject([("version", .string(image.version)), ("url", .string(image.url)),
                               ("sha256", .string(image.sha256))])
        if let size = image.size { data["size"] = .integer(size) }
        try checkReachable(deviceId, force: false)
        let from = cache.device(deviceId)?.info.firmwareVersion
        let previous = writer.upgrades.upgrade(deviceId)
        let recorded: OTAUpgrade
        do {
            guard let started = try writer.recordUpgradeStart(device: deviceId, from: from, image: image,
                                                              now: Timestamp.now()) else {
                throw RequestError.notSent(reason: "the upgrade could not be recorded")
            }
            recorded = started
        } catch let running as CacheWriter.UpgradeInProgress {
            throw UpgradeStartFailure.inProgress(running.upgrade)
        } catch let error as RequestError {
            throw error
        } catch {
            throw RequestError.notSent(reason: "the upgrade could not be recorded in the cache: \(error)")
        }
        do {
            _ = try await request(.otaStart, to: deviceId, data: .object(data), timeout: timeout)
        } catch {
            // A timeout, or a stop of the agent while it waited, leaves it recorded: `ota/start` may have reached the
            // device, which may have started all the same (the stall watch ends it, here or in the next daemon).
            if !error.isTimeout, error != .cancelled {
                do {
                    try writer.restoreUpgrade(device: deviceId, previous)
                } catch let failure {
                    logger.error("could not undo a refused firmware upgrade", metadata: [
                        "device": deviceId, "error": "\(failure)"])
                }
            }
            throw error
        }
        logger.info("firmware upgrade started", metadata: ["device": deviceId, "from": from ?? "", "version": image.version])
        return writer.upgrades.upgrade(deviceId) ?? recorded
    }

    // MARK: the API's `firmware` and `ota`

    /// `firmware`: `{"product"?: P}` → the inventory.
    func apiFirmware(_ request: JSONObject) throws -> JSONValue {
        if let product = request["product"], product.stringValue == nil, !product.isNull {
            throw APIError(400, "'product' must be a string")
        }
        return .object(firmwareInventory(product: request["product"]?.stringValue).json)
    }

    /// `ota`: `{"device": D, "latest": true}` or `{"device": D, "version", "url", "sha256", "size"?}` starts an
    /// upgrade (the answer is the recorded upgrade); `{"device": D, "status": true}` answers the device's latest
    /// upgrade (null when it never had one). Codes: 400 bad request, 404 unknown device, 409 device offline
    /// (nothing sent), 422 the catalog has nothing for the device's product, 424 the device refused (the message
    /// names its code), 504 no answer, 503 not sent; 409 also when an upgrade of the device is in progress (its
    /// `error` is then absent, where an offline device's says `deviceOffline`).
    func apiOTA(_ request: JSONObject, device deviceId: String, snapshot: DeviceSnapshot) async throws -> JSONValue {
        if request["status"]?.boolValue == true {
            return upgrade(deviceId).map { .object($0.json) } ?? .null
        }
        let image: FirmwareCatalog.Image
        if request["latest"]?.boolValue == true {
            guard let latest = firmwareCatalog.latest(for: snapshot.info.productId) else {
                throw APIError(422, "the firmware catalog has no image for \(deviceId)'s product "
                               + "\(snapshot.info.productId ?? "(none reported)")")
            }
            image = latest
        } else {
            guard let version = request["version"]?.stringValue, FirmwareCatalog.isVersion(version) else {
                throw APIError(400, "'version' must be dotted numbers such as 1.5.0, at most "
                               + "\(InputBounds.maxFirmwareVersionBytes) bytes (or pass \"latest\": true)")
            }
            guard let url = request["url"]?.stringValue, FirmwareCatalog.isURL(url) else {
                throw APIError(400, "'url' must be a non-empty string of at most \(InputBounds.maxFirmwareURLBytes) bytes")
            }
            guard let sha256 = request["sha256"]?.stringValue, FirmwareCatalog.isSHA256(sha256) else {
                throw APIError(400, "'sha256' must be 64 hexadecimal digits")
            }
            var size: Int64?
            if let given = request["size"], !given.isNull {
                guard let n = given.int64Value, n > 0 else { throw APIError(400, "'size' must be a positive integer") }
                size = n
            }
            image = FirmwareCatalog.Image(version: version, url: url, sha256: sha256, size: size)
        }
        do {
            return .object(try await startUpgradeUnlessRunning(deviceId, image: image, timeout: nil).json)
        } catch {
            guard case .request(let error) = error else { throw APIError(409, "\(error)") }
            switch error {
            // Beside the message, the error itself: a client tells it from the other 409, an upgrade in progress.
            case .deviceOffline: throw APIError(409, "\(error)", error: error.json)
            case .refused(let code, let message):
                throw APIError(424, "\(deviceId) refused the upgrade with code \(code)"
                               + (message.map { ": \($0)" } ?? "") + (OTARefusal(code: code).map { " (\($0))" } ?? ""))
            case .timeout: throw APIError(504, "\(error)")
            case .invalid, .unsupported: throw APIError(400, "\(error)")
            default: throw APIError(503, "\(error)")
            }
        }
    }
}

/// The refusal codes of `ota/start` (docs/protocol.md).
public enum OTARefusal: Int, Sendable, CustomStringConvertible {
    case badFormat = 1003
    case busy = 1006
    case notApplicable = 1007

    public init?(code: Int) { self.init(rawValue: code) }

    public var description: String {
        switch self {
        case .badFormat: "bad data format"
        case .busy: "busy: an upgrade already runs"
        case .notApplicable: "not applicable: another product, or the version is not newer"
        }
    }
}
