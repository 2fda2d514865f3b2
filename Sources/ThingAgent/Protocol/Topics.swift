/// The agent-to-device requests of PROTOCOL.md. Each is answered on its topic with `_response` appended.
public enum RequestKind: String, Sendable, CaseIterable {
    case setProperties = "properties/set"
    case getInfo = "info/get"
    case wifiScan = "wifi/scan"
    case gatewayTransferStart = "gateway/transfer/start"
}

/// What a device-to-agent topic carries.
public enum InboundKind: Sendable, Equatable {
    case properties
    case status
    case signal
    case info
    case transferStatus
    case response(RequestKind)
}

/// Builds and parses the topic tree `R/D/thing/...` under one root.
public struct Topics: Sendable, Equatable {
    public let root: String

    public init(root: String = "things") {
        self.root = root
    }

    /// The filters the agent subscribes to, with the QoS of PROTOCOL.md's table.
    public var subscriptions: [(filter: String, qos: Int)] {
        [
            ("\(root)/+/thing/properties", 1),
            ("\(root)/+/thing/status", 1),
            ("\(root)/+/thing/signal", 0),
            ("\(root)/+/thing/info", 1),
            ("\(root)/+/thing/gateway/transfer/status", 1),
        ] + RequestKind.allCases.map { ("\(root)/+/thing/\($0.rawValue)_response", 1) }
    }

    public func properties(_ device: String) -> String { "\(root)/\(device)/thing/properties" }
    public func status(_ device: String) -> String { "\(root)/\(device)/thing/status" }
    public func signal(_ device: String) -> String { "\(root)/\(device)/thing/signal" }
    public func info(_ device: String) -> String { "\(root)/\(device)/thing/info" }
    public func transferStatus(_ device: String) -> String { "\(root)/\(device)/thing/gateway/transfer/status" }
    public func request(_ kind: RequestKind, device: String) -> String { "\(root)/\(device)/thing/\(kind.rawValue)" }
    public func response(_ kind: RequestKind, device: String) -> String { "\(root)/\(device)/thing/\(kind.rawValue)_response" }

    public enum ParseError: Error, Sendable, Equatable {
        /// Not under the root or not a thing topic this agent handles.
        case notAThingTopic
        /// The device-id level breaks PROTOCOL.md's rule.
        case invalidDeviceID
    }

    /// Splits `R/D/thing/<suffix>` into the device id and what the topic carries.
    public func parse(_ topic: String) throws(ParseError) -> (device: String, kind: InboundKind) {
        var rest = Substring(topic)
        guard rest.hasPrefix(root), rest.dropFirst(root.count).first == "/" else { throw .notAThingTopic }
        rest = rest.dropFirst(root.count + 1)
        guard let slash = rest.firstIndex(of: "/") else { throw .notAThingTopic }
        let device = rest[..<slash]
        let suffix = rest[rest.index(after: slash)...]
        guard suffix.hasPrefix("thing/") else { throw .notAThingTopic }
        guard let kind = Self.kind(of: suffix.dropFirst(6)) else { throw .notAThingTopic }
        guard DeviceID.isValid(device) else { throw .invalidDeviceID }
        return (String(device), kind)
    }

    private static func kind(of suffix: Substring) -> InboundKind? {
        switch suffix {
        case "properties": return .properties
        case "status": return .status
        case "signal": return .signal
        case "info": return .info
        case "gateway/transfer/status": return .transferStatus
        default:
            guard suffix.hasSuffix("_response"),
                  let request = RequestKind(rawValue: String(suffix.dropLast(9))) else { return nil }
            return .response(request)
        }
    }
}
