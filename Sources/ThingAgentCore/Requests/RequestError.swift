/// How a request to a device ended, when it did not end in success.
public enum RequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The device is known to be offline; nothing was sent (pass `force` to send anyway).
    case deviceOffline(deviceId: String)
    /// The device is not in the cache, or lacks what the request needs.
    case unsupported(deviceId: String, reason: String)
    /// The broker could not take the request (not connected, publish failed).
    case notSent(reason: String)
    /// The device answered with a non-zero code.
    case refused(code: Int, message: String?)
    /// No answer within the timeout.
    case timeout(deviceId: String, request: String, seconds: Double)
    /// Too many requests are waiting for answers.
    case tooManyInFlight(limit: Int)
    /// A property set was refused by the thing model before anything was published.
    case invalid(String)
    /// The caller's task was cancelled, or the agent stopped.
    case cancelled

    public var description: String {
        switch self {
        case .deviceOffline(let id):
            "device \(id) is offline; nothing was sent (force: true sends it anyway)"
        case .unsupported(let id, let reason):
            "device \(id): \(reason)"
        case .notSent(let reason):
            "not sent: \(reason)"
        case .refused(let code, let message):
            "refused by the device with code \(code)\(Self.codeName(code).map { " (\($0))" } ?? "")"
                + (message.map { ": \($0)" } ?? "")
        case .timeout(let id, let request, let seconds):
            "no answer from \(id) to \(request) within \(InputBounds.text(seconds: seconds)) s"
        case .tooManyInFlight(let limit):
            "too many requests in flight (limit \(limit)); try again when some have ended"
        case .invalid(let reason):
            "invalid: \(reason); nothing was sent"
        case .cancelled:
            "cancelled"
        }
    }

    /// docs/protocol.md's refusal codes.
    public static func codeName(_ code: Int) -> String? {
        switch code {
        case 1003: "bad data format"
        case 1004: "unknown property"
        case 1005: "value out of range"
        case 1006: "busy"
        default: nil
        }
    }
}
