import JSON

/// Requests and their outcomes as the API carries them, so that a client of the daemon gets back the very error
/// (its case and fields) the daemon's request ended with.
extension RequestError {
    /// `outcome` (the case's name), `message` (the description) and the case's own fields.
    public var json: JSONObject {
        var object = JSONObject([("outcome", .string(name)), ("message", .string(description))])
        switch self {
        case .deviceOffline(let id):
            object["deviceId"] = .string(id)
        case .unsupported(let id, let reason):
            object["deviceId"] = .string(id)
            object["reason"] = .string(reason)
        case .notSent(let reason), .invalid(let reason):
            object["reason"] = .string(reason)
        case .refused(let code, let message):
            object["code"] = .integer(Int64(code))
            object["deviceMessage"] = message.map(JSONValue.string) ?? .null
        case .timeout(let id, let request, let seconds):
            object["deviceId"] = .string(id)
            object["request"] = .string(request)
            object["seconds"] = .double(seconds)
        case .tooManyInFlight(let limit):
            object["limit"] = .integer(Int64(limit))
        case .cancelled:
            break
        }
        return object
    }

    /// The error `json` describes; nil when it is not one.
    public init?(json: JSONValue?) {
        guard let json, let name = json["outcome"]?.stringValue else { return nil }
        let id = json["deviceId"]?.stringValue ?? ""
        let reason = json["reason"]?.stringValue ?? ""
        switch name {
        case "offline": self = .deviceOffline(deviceId: id)
        case "unsupported": self = .unsupported(deviceId: id, reason: reason)
        case "notSent": self = .notSent(reason: reason)
        case "invalid": self = .invalid(reason)
        case "refused":
            guard let code = json["code"]?.int64Value else { return nil }
            self = .refused(code: Int(code), message: json["deviceMessage"]?.stringValue)
        case "timeout":
            self = .timeout(deviceId: id, request: json["request"]?.stringValue ?? "",
                            seconds: json["seconds"]?.doubleValue ?? 0)
        case "tooManyInFlight": self = .tooManyInFlight(limit: Int(json["limit"]?.int64Value ?? 0))
        case "cancelled": self = .cancelled
        default: return nil
        }
    }
}

extension RequestOutcome {
    /// `json`, with the error's fields under `error` (the API's answer to a `set`).
    package var apiJSON: JSONObject {
        var object = json
        if let error { object["error"] = .object(error.json) }
        return object
    }

    /// The outcome an API answer (`apiJSON`) describes; nil when it is not one.
    package init?(apiJSON json: JSONValue) {
        guard let deviceId = json["device"]?.stringValue,
              let kind = json["request"]?.stringValue.flatMap(RequestKind.init(rawValue:)) else { return nil }
        let msgId = json["msgId"]?.stringValue
        let result: Result<Response, RequestError>
        if json["outcome"] == "success" {
            // An action's output parameters travel as the outcome's `outputParams`.
            let output = json["outputParams"].flatMap { $0.isNull ? nil : JSONValue.object(["outputParams": $0]) }
            result = .success(Response(msgId: msgId ?? "", code: 0, message: json["message"]?.stringValue,
                                       data: output, time: 0))
        } else {
            guard let error = RequestError(json: json["error"]) else { return nil }
            result = .failure(error)
        }
        self.init(deviceId: deviceId, kind: kind, msgId: msgId, result: result,
                  elapsed: .milliseconds(json["elapsedMs"]?.int64Value ?? 0))
    }
}

extension TransferInfo {
    /// The transfer `json` (with `sourceDeviceId`) describes, as the API and the event feed carry it; nil when it
    /// is not one. `updatedAt` is the agent time given (the wire carries none).
    public init?(json: JSONValue?, updatedAt: Millis = 0) {
        guard let json, let source = json["sourceDeviceId"]?.stringValue,
              let status = json["status"]?.int64Value.flatMap({ TransferStatus(rawValue: Int($0)) }) else { return nil }
        self.init(sourceDeviceId: source, targetDeviceId: json["targetDeviceId"]?.stringValue,
                  targetDeviceName: json["targetDeviceName"]?.stringValue, status: status,
                  failedCode: json["failedCode"]?.stringValue ?? "", time: json["time"]?.int64Value ?? 0,
                  updatedAt: updatedAt)
    }
}

extension WifiNetwork {
    /// The network `json` (`WifiNetwork.json`'s shape) describes; nil when it is not one.
    public init?(json: JSONValue) {
        guard let ssid = json["ssid"]?.stringValue, let rssi = json["rssi"]?.int64Value else { return nil }
        self.init(ssid: ssid, rssi: Int(rssi), security: json["sec"]?.int64Value.map { Int($0) })
    }
}
