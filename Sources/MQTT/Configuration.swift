/// The message the broker publishes on the client's behalf when the client disappears without a DISCONNECT.
public struct MQTTWill: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: QoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: QoS = .atLeastOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// TLS settings for `mqtts://` brokers. Paths are PEM files.
public struct MQTTTLS: Sendable {
    /// CA bundle used to verify the broker; nil uses the system CA directory (/etc/ssl/certs).
    public var caFile: String?
    /// Client certificate and key, for brokers that require client certificates. Give both or neither.
    public var certFile: String?
    public var keyFile: String?
    /// Check that the broker certificate names the host in the URL. Turn off only for tests.
    public var verifyHostname: Bool = true

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil, verifyHostname: Bool = true) {
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.verifyHostname = verifyHostname
    }
}

/// Everything needed to reach and talk to one broker.
public struct MQTTConfiguration: Sendable {
    /// `mqtt://host:port` or `mqtts://host:port`; the port defaults to 1883 / 8883.
    public var url: String
    public var clientID: String
    public var username: String?
    public var password: String?
    /// TLS settings; an `mqtts://` URL with `tls == nil` verifies against the system CA directory.
    public var tls: MQTTTLS?
    /// Keepalive interval in seconds (libmosquitto requires at least 5).
    public var keepAlive: Int = 30
    public var protocolVersion: MQTTProtocolVersion = .v311
    /// Clean session (3.1.1) / clean start (5).
    public var cleanSession: Bool = true
    /// MQTT 5 session expiry interval in seconds; nil sends none (the session ends with the connection).
    public var sessionExpiry: UInt32? = nil
    public var will: MQTTWill? = nil
    public var reconnectMinDelay: Duration = .milliseconds(100)
    public var reconnectMaxDelay: Duration = .seconds(30)
    /// Bounds one connection attempt: TCP connect, TLS handshake and CONNACK together.
    public var connectTimeout: Duration = .seconds(5)

    public init(url: String, clientID: String) {
        self.url = url
        self.clientID = clientID
    }
}
