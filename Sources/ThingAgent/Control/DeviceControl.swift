import JSON
import ThingAgentCore

/// Commands for one device, shaped like the device SDKs' device object: its cached properties, its thing model,
/// and `setProperties`.
public final class DeviceControl: Sendable {
    public let deviceId: String
    private let agent: Agent

    /// Commands to `deviceId` through `agent` (also `agent.deviceControl(deviceId:)`).
    public init(deviceId: String, agent: Agent) {
        self.deviceId = deviceId
        self.agent = agent
    }

    /// The properties last reported by the device, from the cache (a set changes them only once the device
    /// reports the new values).
    public var properties: PropertyTable {
        agent.cache.device(deviceId)?.properties ?? PropertyTable()
    }

    /// The model that checks this device's sets; nil when none is known (sets are then not checked).
    public var thingModel: ThingModel? {
        agent.thingModel(for: deviceId)
    }

    /// Checks the values against the thing model, publishes them and waits for the device's answer.
    /// Fails at once when the device is known to be offline, unless `force`.
    @discardableResult
    public func setProperties(_ values: [String: JSONValue], timeout: Duration? = nil,
                              force: Bool = false) async throws(RequestError) -> Response {
        try await agent.setProperties(deviceId: deviceId, values, timeout: timeout, force: force)
    }
}
