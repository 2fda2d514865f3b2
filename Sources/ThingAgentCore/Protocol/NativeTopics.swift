/// Who publishes on a topic of the wire protocol.
public enum TopicPublisher: Sendable, Equatable {
    /// The device (or its gateway for it): a report or an answer. The agent subscribes to it.
    case device
    /// The agent (or the operators' CLI): a request to the device. The device subscribes to it.
    case agent
}

/// One topic of the native dialect, declared once: the subscriptions, the topic parser, the broker roles of
/// provisioning (`AccessPolicy`) and the shipped ACL's checks all come from `NativeTopics.all`
/// (docs/protocol.md's topic table).
public struct NativeTopic: Sendable, Equatable {
    /// The topic below the device's level: `thing/properties` in `R/D/thing/properties`.
    public let suffix: String
    public let qos: Int
    public let publisher: TopicPublisher
    /// What the agent makes of it when it hears it; nil for a topic the agent only publishes.
    public let kind: InboundKind?

    /// Whether the agent subscribes to it: everything a device publishes, and `unbind`, which the agent hears from
    /// whoever removes a device (the CLI, another agent) so that it forgets it too.
    public var agentSubscribes: Bool { kind != nil }
}

/// The native dialect's topics (docs/protocol.md, "Topics").
public enum NativeTopics {
    public static let all: [NativeTopic] = {
        var topics = [
            NativeTopic(suffix: "thing/properties", qos: 1, publisher: .device, kind: .properties),
            NativeTopic(suffix: "thing/status", qos: 1, publisher: .device, kind: .status),
            NativeTopic(suffix: "thing/signal", qos: 0, publisher: .device, kind: .signal),
            NativeTopic(suffix: "thing/info", qos: 1, publisher: .device, kind: .info),
            NativeTopic(suffix: "thing/gateway/transfer/status", qos: 1, publisher: .device, kind: .transferStatus),
            NativeTopic(suffix: "thing/ota/progress", qos: 1, publisher: .device, kind: .otaProgress),
            NativeTopic(suffix: "thing/event/trigger", qos: 1, publisher: .device, kind: .event),
            NativeTopic(suffix: "thing/unbind", qos: 1, publisher: .agent, kind: .unbind),
        ]
        for request in RequestKind.allCases {
            topics.append(NativeTopic(suffix: "thing/\(request.rawValue)", qos: 1, publisher: .agent, kind: nil))
            topics.append(NativeTopic(suffix: "thing/\(request.rawValue)_response", qos: 1, publisher: .device,
                                      kind: .response(request)))
        }
        return topics
    }()
}
