/// An MQTT failure: what kind it is, the libmosquitto error or CONNACK/reason code with its text, and what was being done.
public struct MQTTError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The configuration's URL (or another setting) cannot be used.
        case invalidURL
        /// The broker refused the username/password, or the client is not authorised for the operation.
        case notAuthorized
        /// TLS could not be set up (unreadable files) or the handshake/verification failed.
        case tls
        /// No MQTT connection could be established: closed port, unreachable or unknown host,
        /// connection dropped before CONNACK, or a CONNACK refusal other than authorisation.
        case connectionRefused
        /// The connection attempt did not finish within `connectTimeout`.
        case timeout
        /// The operation needs a connection and there is none now (also: the connection was lost before the ack).
        case notConnected
        /// The broker answered with a failure reason code (SUBACK/PUBACK/UNSUBACK), or the packet was invalid.
        case protocolError
        /// The client was shut down with `disconnect()` (or stopped after refused credentials).
        case closed
        /// The broker closed the connection because another client connected with the same client id (MQTT 5
        /// reason 0x8E "session taken over", or repeated losses right after connecting under 3.1.1).
        case clientIDInUse
        case other
    }

    public let kind: Kind
    /// A libmosquitto error code (`MQTTError.Code`), or a CONNACK / MQTT 5 reason code when `message` says so.
    public let code: Int32
    /// The library's text for `code` (mosquitto_strerror, mosquitto_connack_string or mosquitto_reason_string).
    public let message: String
    /// What was being done: the URL, the topic, the file.
    public let context: String

    public init(kind: Kind, code: Int32, message: String, context: String) {
        self.kind = kind
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String {
        context.isEmpty ? "\(message) (\(kind), code \(code))" : "\(context): \(message) (\(kind), code \(code))"
    }

    /// libmosquitto error codes (enum mosq_err_t), for callers that match on `code`.
    public enum Code {
        public static let success: Int32 = 0
        public static let noMemory: Int32 = 1
        public static let protocolViolation: Int32 = 2
        public static let invalid: Int32 = 3
        public static let noConnection: Int32 = 4
        public static let connectionRefused: Int32 = 5
        public static let notFound: Int32 = 6
        public static let connectionLost: Int32 = 7
        public static let tls: Int32 = 8
        public static let payloadSize: Int32 = 9
        public static let notSupported: Int32 = 10
        public static let auth: Int32 = 11
        public static let aclDenied: Int32 = 12
        public static let unknown: Int32 = 13
        public static let errno: Int32 = 14
        public static let addressInfo: Int32 = 15
        public static let keepalive: Int32 = 19
        public static let lookup: Int32 = 20
        public static let tlsHandshake: Int32 = 23
        public static let timeout: Int32 = 27
    }
}
