import JSON

/// How one request ended, with what is needed to report it: the device's answer or why there was none.
public struct RequestOutcome: Sendable, Equatable {
    public let deviceId: String
    public let kind: RequestKind
    /// The `msgId` the request was published with; nil when it ended before one was given (invalid, offline,
    /// not connected, too many in flight).
    public let msgId: String?
    /// The answer with code 0, or the error: `.refused` carries the device's code and message.
    public let result: Result<Response, RequestError>
    /// From the call to the outcome.
    public let elapsed: Duration

    public init(deviceId: String, kind: RequestKind, msgId: String?, result: Result<Response, RequestError>,
                elapsed: Duration) {
        self.deviceId = deviceId
        self.kind = kind
        self.msgId = msgId
        self.result = result
        self.elapsed = elapsed
    }

    public var succeeded: Bool {
        if case .success = result { return true }
        return false
    }

    public var response: Response? { try? result.get() }

    public var error: RequestError? {
        if case .failure(let error) = result { return error }
        return nil
    }

    /// A short word for the outcome: `success`, `refused`, `timeout`, `invalid`, `offline`, `notSent`,
    /// `tooManyInFlight`, `unsupported` or `cancelled`.
    public var outcome: String { error?.name ?? "success" }

    /// The device's code: 0 on success, its refusal code, nil when it did not answer.
    public var code: Int? {
        switch result {
        case .success(let answer): answer.code
        case .failure(.refused(let code, _)): code
        case .failure: nil
        }
    }

    /// The device's message when it gave one, else what went wrong.
    public var message: String? {
        switch result {
        case .success(let answer): answer.message
        case .failure(.refused(_, let message)): message
        case .failure(let error): error.description
        }
    }

    /// docs/protocol.md-style fields for `--json` output.
    public var json: JSONObject {
        JSONObject([
            ("device", .string(deviceId)),
            ("request", .string(kind.rawValue)),
            ("msgId", msgId.map(JSONValue.string) ?? .null),
            ("outcome", .string(outcome)),
            ("code", code.map { .integer(Int64($0)) } ?? .null),
            ("message", message.map(JSONValue.string) ?? .null),
            ("elapsedMs", .integer(elapsed.milliseconds)),
        ] + (kind == .action ? [("outputParams", outputParams.map(JSONValue.object) ?? .null)] : []))
    }

    /// An action's output parameters, from its answer's `data.outputParams`; nil for other requests or none given.
    public var outputParams: JSONObject? {
        response?.data?["outputParams"]?.objectValue
    }
}

extension RequestError {
    /// The outcome word of `RequestOutcome.outcome`.
    public var name: String {
        switch self {
        case .deviceOffline: "offline"
        case .unsupported: "unsupported"
        case .notSent: "notSent"
        case .refused: "refused"
        case .timeout: "timeout"
        case .tooManyInFlight: "tooManyInFlight"
        case .invalid: "invalid"
        case .cancelled: "cancelled"
        }
    }
}
