/// MQTT delivery guarantee for a publish or a subscription.
public enum QoS: Int, Sendable, Hashable, CaseIterable {
    case atMostOnce = 0
    case atLeastOnce = 1
    case exactlyOnce = 2
}

/// The MQTT protocol revision spoken to the broker.
public enum MQTTProtocolVersion: Sendable, Hashable {
    case v311
    case v5
}
