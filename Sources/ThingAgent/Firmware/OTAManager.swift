import ThingAgentCore
/// Hears one device's firmware upgrades (`OTAManager.addListener`).
public protocol OTAManagerListener: AnyObject, Sendable {
    func otaManager(_ manager: OTAManager, statusDidUpdate upgrade: OTAUpgrade)
}

/// What `checkFirmwareUpgrade()` found: the version the device reports, the catalog's image for its product, and
/// whether that is newer.
public struct FirmwareUpgradeCheck: Sendable, Equatable {
    public var current: String?
    public var latest: FirmwareCatalog.Image?
    public var upgradeAvailable: Bool
}

/// The firmware-upgrade API in the device SDKs' style, for one device on the daemon's agent: check against the
/// catalog, start, and hear the progress (listeners or an AsyncSequence) until the device reports the new version.
public final class OTAManager: Sendable {
    public let deviceId: String
    private let agent: Agent
    private let listeners = WeakListeners()

    /// The manager of `deviceId` on `agent` (also `agent.otaManager(deviceId:)`).
    public init(deviceId: String, agent: Agent) {
        self.deviceId = deviceId
        self.agent = agent
    }

    /// The cached `firmwareVersion` against the catalog's image for the device's product.
    public func checkFirmwareUpgrade() -> FirmwareUpgradeCheck {
        let info = agent.cache.device(deviceId)?.info
        let latest = agent.firmwareCatalog.latest(for: info?.productId)
        return FirmwareUpgradeCheck(current: info?.firmwareVersion, latest: latest,
                                    upgradeAvailable: latest.map { FirmwareVersion.isNewer($0.version, than: info?.firmwareVersion) }
                                        ?? false)
    }

    /// The running or last upgrade; nil when the device never had one.
    public func currentUpgrade() -> OTAUpgrade? {
        agent.upgrade(deviceId)
    }

    /// Starts an upgrade to `image`, or to the catalog's latest when nil (`.unsupported` when the catalog has
    /// none for the product, or it is not newer than the reported version; nothing is sent then). Returns once the
    /// device accepted; the progress then arrives through `statusDidUpdate` and `statusUpdates`.
    @discardableResult
    public func startUpgrade(_ image: FirmwareCatalog.Image? = nil,
                             timeout: Duration? = nil) async throws(RequestError) -> OTAUpgrade {
        let chosen: FirmwareCatalog.Image
        if let image {
            chosen = image
        } else {
            let check = checkFirmwareUpgrade()
            guard let latest = check.latest else {
                throw .unsupported(deviceId: deviceId, reason: "the firmware catalog has no image for its product")
            }
            guard check.upgradeAvailable else {
                throw .unsupported(deviceId: deviceId, reason: "already at \(check.current ?? latest.version), "
                                   + "the catalog's latest")
            }
            chosen = latest
        }
        return try await agent.startUpgrade(deviceId, image: chosen, timeout: timeout)
    }

    // MARK: listeners

    /// Registers `listener` for `statusDidUpdate`. Held weakly: releasing the listener unregisters it.
    public func addListener(_ listener: some OTAManagerListener) {
        listeners.add(listener, hub: agent.events, device: deviceId, kinds: .ota) { [self] listener, event in
            if case .upgradeChanged(_, let upgrade) = event { listener.otaManager(self, statusDidUpdate: upgrade) }
        }
    }

    public func removeListener(_ listener: some OTAManagerListener) {
        listeners.remove(listener)
    }

    /// Every change of this device's upgrade, as an AsyncSequence; ends when the consuming task is cancelled or
    /// the agent stops. Registered when this property is read, so read it before `startUpgrade`.
    public var statusUpdates: AsyncCompactMapSequence<DeviceEventStream, OTAUpgrade> {
        agent.events.events(device: deviceId, kinds: .ota).compactMap { event in
            if case .upgradeChanged(_, let upgrade) = event { return upgrade }
            return nil
        }
    }
}

extension Agent {
    /// The firmware-upgrade manager for `deviceId`, on this agent.
    public func otaManager(deviceId: String) -> OTAManager {
        OTAManager(deviceId: deviceId, agent: self)
    }
}
