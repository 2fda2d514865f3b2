/// One application message, received or to be sent. The topic and payload are owned copies.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: QoS
    public var retain: Bool
    /// MQTT 5 request/response properties; nil under 3.1.1 or when absent.
    public var responseTopic: String?
    public var correlationData: [UInt8]?

    public init(
        topic: String, payload: [UInt8], qos: QoS = .atMostOnce, retain: Bool = false,
        responseTopic: String? = nil, correlationData: [UInt8]? = nil
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }

    /// The payload decoded as UTF-8 (invalid sequences repaired).
    public var text: String { String(decoding: payload, as: UTF8.self) }
}
