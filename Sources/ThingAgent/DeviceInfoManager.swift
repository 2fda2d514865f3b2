import ThingAgentCore
/// Receives Wi-Fi signal updates for one device (`DeviceInfoManager.addListener`).
public protocol DeviceInfoManagerListener: AnyObject, Sendable {
    func deviceInfoManager(_ manager: DeviceInfoManager, wifiSignalDidUpdate signal: SignalReading)
}

/// The device-information API of the device SDKs, for one device.
public final class DeviceInfoManager: Sendable {
    public let deviceId: String
    private let agent: Agent
    private let listeners = WeakListeners()

    /// The manager of `deviceId` on `agent` (also `agent.deviceInfoManager(deviceId:)`).
    public init(deviceId: String, agent: Agent) {
        self.deviceId = deviceId
        self.agent = agent
    }

    /// The cached device information, from memory, at once; nil when the device is unknown.
    public var deviceInfo: DeviceInfo? {
        agent.cache.device(deviceId)?.info
    }

    /// Everything cached for the device (properties, status, signal), from memory.
    public var snapshot: DeviceSnapshot? {
        agent.cache.device(deviceId)
    }

    /// Asks the device for fresh information (`R/D/thing/info/get`), waits for the answer, updates the cache and
    /// returns the information with its `hardwareInfo`. Fails at once when the device is known to be offline.
    public func fetchData(timeout: Duration? = nil) async throws(RequestError) -> DeviceInfo {
        try await agent.fetchInfo(deviceId, timeout: timeout)
    }

    /// Asks the device for the Wi-Fi networks it can see: one per SSID, strongest first (`Agent.scanWifiList`).
    public func scanWifiList(timeout: Duration? = nil) async throws(RequestError) -> [WifiNetwork] {
        try await agent.scanWifiList(deviceId, timeout: timeout)
    }

    /// Registers `listener` for `wifiSignalDidUpdate`. Held weakly: releasing the listener unregisters it.
    public func addListener(_ listener: some DeviceInfoManagerListener) {
        listeners.add(listener, hub: agent.events, device: deviceId, kinds: .signal) { [self] listener, event in
            if case .signalUpdated(_, let wifi?, _) = event {
                listener.deviceInfoManager(self, wifiSignalDidUpdate: wifi)
            }
        }
    }

    public func removeListener(_ listener: some DeviceInfoManagerListener) {
        listeners.remove(listener)
    }

    /// Wi-Fi signal updates as an AsyncSequence; ends when the consuming task is cancelled or the agent stops.
    public var wifiSignalUpdates: AsyncCompactMapSequence<DeviceEventStream, SignalReading> {
        agent.events.events(device: deviceId, kinds: .signal)
            .compactMap { event in
                if case .signalUpdated(_, let wifi?, _) = event { return wifi }
                return nil
            }
    }
}
