import JSON
import ThingAgentCore

/// Hears the progress of one gateway's transfers (`GatewayTransferManager.addListener`).
public protocol GatewayTransferManagerListener: AnyObject, Sendable {
    func gatewayTransferManager(_ manager: GatewayTransferManager, statusDidUpdate info: TransferInfo)
}

/// The gateway-replacement API of the device SDKs, for the healthy gateway that takes over the sub-devices of a
/// faulty one. Each method also exists as a static method taking the device id.
public final class GatewayTransferManager: Sendable {
    public let deviceId: String
    private let agent: Agent
    private let listeners = WeakListeners()

    /// The manager of the gateway `deviceId` on `agent` (also `agent.gatewayTransferManager(deviceId:)`).
    public init(deviceId: String, agent: Agent) {
        self.deviceId = deviceId
        self.agent = agent
    }

    /// Whether the cached information lists the `gatewayTransfer` ability.
    public func deviceSupportsTransfer() -> Bool {
        agent.cache.device(deviceId)?.info.supports(.gatewayTransfer) ?? false
    }

    /// The cached state of this gateway's latest transfer; status `none` when it never ran one.
    public func deviceTransferInfo() -> TransferInfo {
        agent.cache.device(deviceId)?.transfer ?? .none(deviceId)
    }

    /// The gateways this one can replace: other gateways of the same product in the same space, offline ones first
    /// (the faulty one usually is), then by id.
    public func gateways() -> [DeviceSnapshot] {
        guard let me = agent.cache.device(deviceId) else { return [] }
        return Self.gateways(replaceableBy: me, among: agent.cache.filter { $0.isReplaceable(by: me) })
    }

    /// The devices of `fleet` that `gateway` can replace, ordered as `gateways()` orders them (for a reader of the
    /// cache file that has no agent).
    public static func gateways(replaceableBy gateway: DeviceSnapshot,
                                among fleet: some Sequence<DeviceSnapshot>) -> [DeviceSnapshot] {
        let rank: (DeviceSnapshot) -> Int = { device in
            switch device.online {
            case false?: 0
            case nil: 1
            case true?: 2
            }
        }
        return fleet.filter { $0.isReplaceable(by: gateway) }.sorted { (rank($0), $0.id) < (rank($1), $1.id) }
    }

    /// Asks this gateway to take over the sub-devices of `faulty` (`R/D/thing/gateway/transfer/start`) and returns
    /// the transfer once the gateway accepted it; its progress then arrives through `statusDidUpdate`.
    ///
    /// Checked first, with nothing sent when they fail (`.unsupported`): this gateway supports transfers, no transfer
    /// of its own is running (status none, finish or failed), and `faulty` is among `gateways()`. The gateway's
    /// refusal (code 1006 when it is busy) is `.refused`; no answer is `.timeout`.
    @discardableResult
    public func transfer(fromGateway faulty: String, timeout: Duration? = nil) async throws(RequestError) -> TransferInfo {
        guard agent.cache.device(deviceId) != nil else {
            throw .unsupported(deviceId: deviceId, reason: "not in the cache, so its abilities are unknown")
        }
        guard deviceSupportsTransfer() else {
            throw .unsupported(deviceId: deviceId, reason: "cannot replace a gateway (no gatewayTransfer ability)")
        }
        let current = deviceTransferInfo()
        guard current.status.isIdle else {
            throw .unsupported(deviceId: deviceId, reason: "busy: a transfer from \(current.targetDeviceId ?? "?") "
                + "is running (status \(current.status)); wait until it finishes or fails")
        }
        let candidates = gateways()
        guard let target = candidates.first(where: { $0.id == faulty }) else {
            throw .unsupported(deviceId: deviceId, reason: "\(faulty) is not a gateway it can replace (that needs "
                + "another gateway of the same product in the same space; candidates: "
                + (candidates.isEmpty ? "none" : candidates.map(\.id).joined(separator: ", ")) + ")")
        }
        let sentAt = Timestamp.now()
        // Recorded before it is sent: the gateway may report progress the moment it accepts, and only a transfer
        // started here may move sub-devices.
        do {
            try agent.writer.recordAcceptedTransfer(gateway: deviceId, target: faulty, at: sentAt)
            agent.replicateTransfer(deviceId)
        } catch {
            throw .notSent(reason: "could not record the transfer in the cache: \(error)")
        }
        do {
            _ = try await agent.request(.gatewayTransferStart, to: deviceId,
                                        data: .object(JSONObject([("targetDeviceId", .string(faulty))])),
                                        timeout: timeout)
        } catch {
            // A timeout leaves it recorded: the gateway may have started all the same.
            if !error.isTimeout {
                agent.writer.forgetAcceptedTransfer(gateway: deviceId, target: faulty)
                agent.replicateTransfer(deviceId)
            }
            throw error
        }
        do {
            let started = try agent.writer.recordTransferStart(
                gateway: deviceId, target: faulty, targetName: target.info.name, sentAt: sentAt, now: Timestamp.now(),
                topic: agent.topics.transferStatus(deviceId)) ?? .none(deviceId)
            return started
        } catch {
            // The gateway accepted; only the local record failed. Its reports will still be cached.
            agent.logger.error("could not record the accepted gateway transfer", metadata: [
                "gateway": deviceId, "error": "\(error)"])
            return TransferInfo(sourceDeviceId: deviceId, targetDeviceId: faulty, targetDeviceName: target.info.name,
                                status: .unknown, updatedAt: Timestamp.now())
        }
    }

    // MARK: listeners

    /// Registers `listener` for `statusDidUpdate`. Held weakly: releasing the listener unregisters it.
    public func addListener(_ listener: some GatewayTransferManagerListener) {
        listeners.add(listener, hub: agent.events, device: deviceId, kinds: .transfer) { [self] listener, event in
            if case .transferStatusChanged(_, let info) = event {
                listener.gatewayTransferManager(self, statusDidUpdate: info)
            }
        }
    }

    public func removeListener(_ listener: some GatewayTransferManagerListener) {
        listeners.remove(listener)
    }

    /// Every change of this gateway's transfer, as an AsyncSequence; ends when the consuming task is cancelled or
    /// the agent stops. Registered when this property is read, so read it before `transfer(fromGateway:)`.
    public var statusUpdates: AsyncCompactMapSequence<DeviceEventStream, TransferInfo> {
        agent.events.events(device: deviceId, kinds: .transfer)
            .compactMap { event in
                if case .transferStatusChanged(_, let info) = event { return info }
                return nil
            }
    }

    // MARK: static forms

    public static func deviceSupportsTransfer(deviceId: String, agent: Agent) -> Bool {
        GatewayTransferManager(deviceId: deviceId, agent: agent).deviceSupportsTransfer()
    }

    public static func deviceTransferInfo(deviceId: String, agent: Agent) -> TransferInfo {
        GatewayTransferManager(deviceId: deviceId, agent: agent).deviceTransferInfo()
    }

    public static func gateways(deviceId: String, agent: Agent) -> [DeviceSnapshot] {
        GatewayTransferManager(deviceId: deviceId, agent: agent).gateways()
    }

    @discardableResult
    public static func transfer(deviceId: String, fromGateway faulty: String, agent: Agent,
                                timeout: Duration? = nil) async throws(RequestError) -> TransferInfo {
        try await GatewayTransferManager(deviceId: deviceId, agent: agent).transfer(fromGateway: faulty, timeout: timeout)
    }
}

extension Agent {
    /// The SDKs' device-information manager for `deviceId`, on this agent.
    public func deviceInfoManager(deviceId: String) -> DeviceInfoManager {
        DeviceInfoManager(deviceId: deviceId, agent: self)
    }

    /// The SDKs' gateway-replacement manager for the gateway `deviceId`, on this agent.
    public func gatewayTransferManager(deviceId: String) -> GatewayTransferManager {
        GatewayTransferManager(deviceId: deviceId, agent: self)
    }

    /// Commands for `deviceId` (its properties, thing model and sets), on this agent.
    public func deviceControl(deviceId: String) -> DeviceControl {
        DeviceControl(deviceId: deviceId, agent: self)
    }
}
