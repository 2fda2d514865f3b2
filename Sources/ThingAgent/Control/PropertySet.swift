import JSON
import ThingAgentCore

extension Agent {
    /// The thing model that checks sets to `deviceId`: the model of the product the device reported in its info.
    /// Nil when the device, its `productId` or that product's model is unknown; its sets are then not checked.
    public func thingModel(for deviceId: String) -> ThingModel? {
        models.model(for: cache.device(deviceId)?.info.productId)
    }

    /// What is checked before a property set is published, without publishing anything: the device id
    /// (`.unsupported`), the values against the device's thing model (`.invalid`, naming the property and the rule
    /// broken), and that the device is not known to be offline (`.deviceOffline`, unless `force`).
    public func checkPropertySet(deviceId: String, _ values: [String: JSONValue],
                                 force: Bool = false) throws(RequestError) {
        try Self.checkPropertySet(deviceId: deviceId, values, device: cache.device(deviceId), models: models,
                                  force: force)
    }

    /// `checkPropertySet` against a snapshot of the device (nil: unknown) and thing models, wherever they come from
    /// (the agent's cache, or the cache file as `AgentClient` reads it).
    static func checkPropertySet(deviceId: String, _ values: [String: JSONValue], device: DeviceSnapshot?,
                                 models: ThingModels, force: Bool) throws(RequestError) {
        guard DeviceID.isValid(deviceId) else { throw .unsupported(deviceId: deviceId, reason: "not a valid device id") }
        guard !values.isEmpty else { throw .invalid("no property to set") }
        // Even without a model a code must be one a device could report back (PayloadDecoder's limit).
        for code in values.keys.sorted() where code.isEmpty || code.utf8.count > PayloadDecoder.maxPropertyCodeLength {
            throw .invalid("property code '\(code.prefix(80))' is empty or longer than 64 bytes")
        }
        if let model = models.model(for: device?.info.productId) {
            do {
                try model.validate(values)
            } catch {
                throw .invalid(error.description)
            }
        }
        if !force, device?.online == false { throw .deviceOffline(deviceId: deviceId) }
    }

    /// Sets properties on a device (`R/D/thing/properties/set`, QoS 1, codes in sorted order) and waits for its
    /// answer. Checked first by `checkPropertySet`: nothing invalid is published. The cache is not changed here;
    /// the device's next property report changes it.
    @discardableResult
    public func setProperties(deviceId: String, _ values: [String: JSONValue], timeout: Duration? = nil,
                              force: Bool = false) async throws(RequestError) -> Response {
        try await sendPropertySet(deviceId: deviceId, values, timeout: timeout, force: force).result.get()
    }

    /// `setProperties` reporting its outcome instead of throwing (for runners that report every outcome).
    public func sendPropertySet(deviceId: String, _ values: [String: JSONValue], timeout: Duration? = nil,
                                force: Bool = false) async -> RequestOutcome {
        let started = ContinuousClock.now
        do {
            try checkPropertySet(deviceId: deviceId, values, force: force)
        } catch {
            return RequestOutcome(deviceId: deviceId, kind: .setProperties, msgId: nil, result: .failure(error),
                                  elapsed: ContinuousClock.now - started)
        }
        let data = JSONObject(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        return await send(.setProperties, to: deviceId, data: .object(data), timeout: timeout, force: force)
    }
}
