/// Gateway-replacement progress, with docs/protocol.md's codes.
public enum TransferStatus: Int, Sendable, CaseIterable, CustomStringConvertible {
    case unknown = 0
    case deviceConfigInit = 1
    case deviceDataInit = 2
    case osConfigInit = 3
    case finish = 4
    case failed = 5
    case none = 6

    /// A transfer in one of these states may be followed by a new one.
    public var isIdle: Bool { self == .none || self == .finish || self == .failed }

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .deviceConfigInit: "deviceConfigInit"
        case .deviceDataInit: "deviceDataInit"
        case .osConfigInit: "osConfigInit"
        case .finish: "finish"
        case .failed: "failed"
        case .none: "none"
        }
    }
}

/// The state of the latest gateway replacement run by a (new) gateway.
public struct TransferInfo: Sendable, Equatable {
    /// The gateway that takes over (the one reporting progress).
    public var sourceDeviceId: String
    /// The faulty gateway being replaced.
    public var targetDeviceId: String?
    public var targetDeviceName: String?
    public var status: TransferStatus
    public var failedCode: String
    /// Device time of the latest report; stale reports lose.
    public var time: Millis
    /// Agent time of the latest change, used to detect stalls.
    public var updatedAt: Millis

    public init(sourceDeviceId: String, targetDeviceId: String? = nil, targetDeviceName: String? = nil,
                status: TransferStatus = .none, failedCode: String = "", time: Millis = 0, updatedAt: Millis = 0) {
        self.sourceDeviceId = sourceDeviceId
        self.targetDeviceId = targetDeviceId
        self.targetDeviceName = targetDeviceName
        self.status = status
        self.failedCode = failedCode
        self.time = time
        self.updatedAt = updatedAt
    }

    public static func none(_ gateway: String) -> TransferInfo { TransferInfo(sourceDeviceId: gateway) }
}
