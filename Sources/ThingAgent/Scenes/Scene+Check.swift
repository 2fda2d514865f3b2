import JSON
import ThingAgentCore

extension Scene {
    /// The checks a scene's values get when it is saved: each action's set against its device's thing model, as a
    /// set would be checked when it is sent (a device with no known model is not checked, as for `set`).
    public func check(model: (String) -> ThingModel?) throws(EditError) {
        guard !name.isEmpty, name.count <= 64 else { throw .invalid("a scene name has 1 to 64 characters") }
        guard !actions.isEmpty else { throw .invalid("scene '\(name)' has no action") }
        for action in actions {
            guard DeviceID.isValid(action.deviceId) else { throw .invalid("'\(action.deviceId)' is not a device id") }
            guard !action.properties.isEmpty else { throw .invalid("scene '\(name)': \(action.deviceId) sets nothing") }
            do {
                try model(action.deviceId)?.validate(action.properties)
            } catch {
                throw .modelRefused("scene '\(name)', \(action.deviceId): \(error.description)")
            }
        }
    }
}
