import JSON

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
    public func startUpgrade(_ deviceId: String, image: FirmwareCatalog.Image,
                             timeout: Duration? = nil) async throws(RequestError) -> OTAUpgrade {
        guard role == .service else {
            throw .unsupported(deviceId: deviceId, reason: "firmware upgrades are tracked by the daemon (thing-agent run)")
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
        } catch {
            throw .notSent(reason: "the upgrade could not be recorded in the cache: \(error)")
        }
        do {
            _ = try await request(.otaStart, to: deviceId, data: .object(data), timeout: timeout)
        } catch {
            // A timeout leaves it recorded: the device may have started all the same (the stall watch ends it).
            if !error.isTimeout {
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
    /// names its code), 504 no answer, 503 not sent.
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
            guard let version = request["version"]?.stringValue, FirmwareVersion(version) != nil else {
                throw APIError(400, "'version' must be dotted numbers such as 1.5.0 (or pass \"latest\": true)")
            }
            guard let url = request["url"]?.stringValue, !url.isEmpty else { throw APIError(400, "'url' is missing") }
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
            return .object(try await startUpgrade(deviceId, image: image).json)
        } catch {
            switch error {
            case .deviceOffline: throw APIError(409, "\(error)")
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
