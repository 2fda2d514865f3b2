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
    /// MQTT 5, and 3.1.1 with a broker that refuses 5 (its CONNACK says "unsupported protocol version", or it
    /// answers a version 5 CONNECT with a malformed packet): the client retries that broker at once in 3.1.1 and
    /// keeps speaking 3.1.1 to it for its whole life. Only a configuration's choice: a connection is `.v311` or `.v5`.
    case auto
}
