import JSON
import ThingAgentCore

extension Agent {
    /// Invokes the action (an Alink service) `name` of `deviceId` with `params`, and reports how it ended, as
    /// `sendPropertySet` does: success with the device's output parameters (`RequestOutcome.outputParams`), refused,
    /// timeout, not sent, offline (unless `force`), or invalid (a name that is no identifier, or one the device's
    /// thing model does not have, or parameters it does not take: nothing is sent then). A model that describes no
    /// actions checks nothing: the device answers for them.
    public func invokeAction(deviceId: String, name: String, params: JSONObject = [:], timeout: Duration? = nil,
                             force: Bool = false) async -> RequestOutcome {
        guard RequestKind.isActionName(name) else {
            return RequestOutcome(deviceId: deviceId, kind: .action, msgId: nil, result: .failure(.invalid(
                "'\(name.prefix(80))' is not an action name (letters, digits and _, 1 to 50)")), elapsed: .zero)
        }
        if let model = thingModel(for: deviceId) {
            do {
                try model.validateAction(name, params: params)
            } catch {
                return RequestOutcome(deviceId: deviceId, kind: .action, msgId: nil,
                                      result: .failure(.invalid(error.description)), elapsed: .zero)
            }
        }
        let data = JSONObject([("actionCode", .string(name)), ("inputParams", .object(params))])
        return await send(.action, to: deviceId, data: .object(data), timeout: timeout, force: force)
    }
}
