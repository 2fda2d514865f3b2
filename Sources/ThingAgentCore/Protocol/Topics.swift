/// The agent-to-device requests of docs/protocol.md. Each is answered on its topic with `_response` appended.
public enum RequestKind: String, Sendable, CaseIterable {
    case setProperties = "properties/set"
    case getInfo = "info/get"
    case wifiScan = "wifi/scan"
    case gatewayTransferStart = "gateway/transfer/start"
    case otaStart = "ota/start"
    /// An action (a service) of the device by name, with input parameters; answered with output parameters.
    case action = "action/execute"

    /// An action's name: letters, digits and `_`, 1 to 50 (a TSL identifier, and one topic level in any dialect).
    package static func isActionName(_ name: String) -> Bool {
        (1...50).contains(name.utf8.count) && name.utf8.allSatisfy {
            ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) || $0 == 95
        }
    }
}

/// What a device-to-agent topic carries.
public enum InboundKind: Sendable, Equatable {
    case properties
    case status
    case signal
    case info
    case transferStatus
    /// `R/D/thing/ota/progress`: a firmware upgrade's stage and progress.
    case otaProgress
    /// `R/D/thing/event/trigger`: an event the device reports.
    case event
    case response(RequestKind)
    /// `R/D/thing/unbind`: the device was removed (by this agent, the CLI or another client); forget it.
    case unbind
}

/// Builds and parses the topic tree `R/D/thing/...` under one root.
public struct Topics: Sendable, Equatable {
    public let root: String
    private let rootBytes: [UInt8]

    public init(root: String = "things") {
        self.root = root
        self.rootBytes = Array(root.utf8)
    }

    /// The filters the agent subscribes to, with their QoS (`NativeTopics.all`).
    public var subscriptions: [(filter: String, qos: Int)] {
        NativeTopics.all.filter(\.agentSubscribes).map { ("\(root)/+/\($0.suffix)", $0.qos) }
    }

    /// The topic of `topic` for `device`: `R/D/<suffix>`.
    public func topic(_ topic: NativeTopic, device: String) -> String { "\(root)/\(device)/\(topic.suffix)" }

    public func properties(_ device: String) -> String { "\(root)/\(device)/thing/properties" }
    public func status(_ device: String) -> String { "\(root)/\(device)/thing/status" }
    public func signal(_ device: String) -> String { "\(root)/\(device)/thing/signal" }
    public func info(_ device: String) -> String { "\(root)/\(device)/thing/info" }
    public func transferStatus(_ device: String) -> String { "\(root)/\(device)/thing/gateway/transfer/status" }
    public func otaProgress(_ device: String) -> String { "\(root)/\(device)/thing/ota/progress" }
    public func event(_ device: String) -> String { "\(root)/\(device)/thing/event/trigger" }
    /// The unbind request published when a device is removed (docs/devices-and-rooms.md, "Remove a device").
    public func unbind(_ device: String) -> String { "\(root)/\(device)/thing/unbind" }
    public func request(_ kind: RequestKind, device: String) -> String { "\(root)/\(device)/thing/\(kind.rawValue)" }
    public func response(_ kind: RequestKind, device: String) -> String { "\(root)/\(device)/thing/\(kind.rawValue)_response" }
    /// A pairing's activation request, named by its bootstrap user name (docs/protocol.md, "Provisioning").
    public func activate(_ username: String) -> String { "\(root)/\(username)/thing/activate" }
    public func activateResponse(_ username: String) -> String { "\(root)/\(username)/thing/activate_response" }
    /// The filter that brings every activation request (the daemon subscribes to it when provisioning is on).
    public var activations: String { "\(root)/+/thing/activate" }

    /// The user name of an activation topic (`R/U/thing/activate`); nil for any other topic.
    public func activationUser(_ topic: String) -> String? {
        let prefix = root + "/", suffix = "/thing/activate"
        guard topic.hasPrefix(prefix), topic.hasSuffix(suffix), topic.count > prefix.count + suffix.count else { return nil }
        let user = String(topic.dropFirst(prefix.count).dropLast(suffix.count))
        return DeviceID.isValid(user) ? user : nil
    }

    public enum ParseError: Error, Sendable, Equatable {
        /// Not under the root or not a thing topic this agent handles.
        case notAThingTopic
        /// The device-id level breaks docs/protocol.md's rule.
        case invalidDeviceID
    }

    /// Splits `R/D/thing/<suffix>` into the device id and what the topic carries.
    /// Works on the topic's UTF-8 bytes: it runs for every message, before anything else.
    public func parse(_ topic: String) throws(ParseError) -> (device: String, kind: InboundKind) {
        var topic = topic
        let parsed: Result<(String, InboundKind), ParseError> = topic.withUTF8 { bytes in
            let root = rootBytes
            guard bytes.count > root.count + 1, bytes[root.count] == UInt8(ascii: "/"),
                  bytes[..<root.count].elementsEqual(root)
            else { return .failure(.notAThingTopic) }
            let deviceStart = root.count + 1
            guard let slash = bytes[deviceStart...].firstIndex(of: UInt8(ascii: "/")) else {
                return .failure(.notAThingTopic)
            }
            let rest = UnsafeBufferPointer(rebasing: bytes[(slash + 1)...])
            guard let kind = Self.kind(of: rest) else { return .failure(.notAThingTopic) }
            let device = UnsafeBufferPointer(rebasing: bytes[deviceStart..<slash])
            guard DeviceID.isValid(utf8: device) else { return .failure(.invalidDeviceID) }
            return .success((String(decoding: device, as: UTF8.self), kind))
        }
        return try parsed.get()
    }

    /// The suffixes after `R/D/` the agent hears, as bytes, with what each carries.
    private static let suffixes: [([UInt8], InboundKind)] = NativeTopics.all.compactMap { topic in
        topic.kind.map { (Array(topic.suffix.utf8), $0) }
    }

    private static func kind(of suffix: UnsafeBufferPointer<UInt8>) -> InboundKind? {
        for (bytes, kind) in suffixes where bytes.count == suffix.count {
            if bytes.withUnsafeBufferPointer({ $0.elementsEqual(suffix) }) { return kind }
        }
        return nil
    }
}
