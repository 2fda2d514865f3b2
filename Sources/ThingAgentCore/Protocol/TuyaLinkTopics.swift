/// One topic of a TuyaLink device, `tylink/{deviceId}/{suffix}`: what the device publishes (the agent reads it) or
/// what the platform, here the agent, publishes to it (the device reads it).
package struct TuyaLinkTopic: Sendable, Equatable {
    package let suffix: String
    package let publisher: TopicPublisher
    /// Only a gateway speaks it: its sub-devices' binding, sessions and topology.
    package let gatewayOnly: Bool

    /// The topic of one device; `+` gives the filter for every device.
    package func topic(_ device: some StringProtocol) -> String { "tylink/\(device)/\(suffix)" }
}

/// The topics of one TuyaLink device, declared once (docs/protocol.md, "TuyaLink"): the agent's subscriptions,
/// the simulator's, the shipped ACL and the tests come from `TuyaLinkTopics.all`, and `TuyaLinkDialect` reads
/// each device topic by its place in `TuyaLinkDialect.Topic`.
package enum TuyaLinkTopics {
    package static let all: [TuyaLinkTopic] = {
        var topics: [TuyaLinkTopic] = []
        for topic in TuyaLinkDialect.Topic.allCases {
            topics.append(TuyaLinkTopic(suffix: topic.suffix, publisher: .device, gatewayOnly: topic.gatewayOnly))
            if let answer = topic.answerSuffix {
                topics.append(TuyaLinkTopic(suffix: answer, publisher: .agent, gatewayOnly: topic.gatewayOnly))
            }
        }
        // The agent's requests: a property set, an action, a firmware upgrade.
        for suffix in ["thing/property/set", "thing/action/execute", "ota/issue"] {
            topics.append(TuyaLinkTopic(suffix: suffix, publisher: .agent, gatewayOnly: false))
        }
        return topics
    }()

    /// The filters of one device (`+` for every device) published by `publisher`, a gateway's included when
    /// `gateway`.
    package static func filters(of device: String, gateway: Bool, publisher: TopicPublisher) -> [String] {
        all.filter { $0.publisher == publisher && (gateway || !$0.gatewayOnly) }.map { $0.topic(device) }
    }

    /// The client id Tuya's SDK connects with: `tuyalink_<deviceId>`.
    package static let clientPrefix = "tuyalink_"
}
