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

/// A message the client publishes itself right after every CONNACK, the first connect and every reconnect, before
/// any other packet of that connection (libmosquitto resends unacknowledged messages only after it): the counterpart
/// of the will, so that a retained "online" replaces the "offline" the will left while the client was away.
public struct MQTTBirth: Sendable {
    public var topic: String
    /// Made at each connect, so that it can carry the current time.
    public var payload: @Sendable () -> [UInt8]
    public var qos: QoS
    public var retain: Bool

    public init(topic: String, qos: QoS = .atLeastOnce, retain: Bool = true,
                payload: @escaping @Sendable () -> [UInt8]) {
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

/// Everything needed to reach and talk to a broker, or to one of a list of brokers (the nodes of a cluster).
public struct MQTTConfiguration: Sendable {
    /// The brokers, in the order they are tried: `mqtt://host:port` or `mqtts://host:port` each (the port defaults
    /// to 1883 / 8883), all of one scheme. The first `connect()` tries them in order until one accepts; a lost
    /// connection goes on with the next one (and round the list), the reconnect backoff growing per round of the
    /// list, not per broker.
    public var brokers: [String]
    /// The first broker of `brokers`; setting it makes it the only one.
    public var url: String {
        get { brokers.first ?? "" }
        set { brokers = [newValue] }
    }
    public var clientID: String
    public var username: String?
    public var password: String?
    /// TLS settings; an `mqtts://` URL with `tls == nil` verifies against the system CA directory.
    public var tls: MQTTTLS?
    /// Keepalive interval in seconds (libmosquitto requires at least 5).
    public var keepAlive: Int = 30
    /// `.v311`, `.v5`, or `.auto` (MQTT 5, and 3.1.1 with each broker that refuses 5).
    public var protocolVersion: MQTTProtocolVersion = .v311
    /// Clean session (3.1.1) / clean start (5).
    public var cleanSession: Bool = true
    /// MQTT 5 session expiry interval in seconds; nil sends none (the session ends with the connection). Not sent to
    /// a broker spoken to in 3.1.1, where a session lasts until a clean-session connect.
    public var sessionExpiry: UInt32? = nil
    public var will: MQTTWill? = nil
    public var reconnectMinDelay: Duration = .milliseconds(100)
    public var reconnectMaxDelay: Duration = .seconds(30)
    /// Bounds one connection attempt: TCP connect, TLS handshake and CONNACK together.
    public var connectTimeout: Duration = .seconds(5)
    /// Published after every CONNACK (see `MQTTBirth`).
    public var birth: MQTTBirth? = nil
    /// A connection lost sooner than this after it was made does not reset the reconnect backoff, so that a broker
    /// that keeps closing new connections (another client with the same client id) sees ever longer pauses instead
    /// of a reconnect every `reconnectMinDelay`.
    public var stableConnection: Duration = .seconds(10)
    /// How many losses in a row, each within `stableConnection` of its CONNACK (and the broker up all along), make
    /// the client report that another client probably uses its client id: brokers close the older connection, under
    /// 3.1.1 without a reason, and mosquitto 2.0 under MQTT 5 too (others send reason 0x8E, reported at once).
    public var quickLossesBeforeTakeoverReport: Int = 3
    /// QoS 1/2 messages this client has unacknowledged at once (1...65535; libmosquitto's default is 20); more
    /// wait in the library, in order, until acknowledgements make room. An MQTT 5 broker may ask for fewer.
    public var sendMaximum: Int = 20

    /// Whether a connection to `address` speaks TLS: an `mqtts://` URL, or TLS settings given.
    func usesTLS(_ address: BrokerAddress) -> Bool {
        address.usesTLS || tls != nil
    }

    /// One broker.
    public init(url: String, clientID: String) {
        self.init(brokers: [url], clientID: clientID)
    }

    /// A list of brokers, tried in order (`brokers`).
    public init(brokers: [String], clientID: String) {
        self.brokers = brokers
        self.clientID = clientID
    }
}
