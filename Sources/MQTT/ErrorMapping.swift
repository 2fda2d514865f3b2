internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

extension MQTTError {
    /// An error for a libmosquitto return code. `errno` is consulted for MOSQ_ERR_ERRNO, whose text is then the OS's.
    static func library(_ rc: Int32, errno osError: Int32 = 0, context: String, kind: Kind? = nil) -> MQTTError {
        var text = libraryText(libmosquitto.mosquitto_strerror(rc))
        if rc == Code.errno, osError != 0 {
            text = String(cString: strerror(osError))
        }
        return MQTTError(kind: kind ?? Self.kind(forLibraryCode: rc, errno: osError), code: rc, message: text, context: context)
    }

    static func kind(forLibraryCode rc: Int32, errno osError: Int32) -> Kind {
        switch rc {
        case Code.tls, Code.tlsHandshake: return .tls
        case Code.noConnection: return .notConnected
        case Code.connectionLost, Code.connectionRefused, Code.addressInfo, Code.lookup: return .connectionRefused
        case Code.errno:
            switch osError {
            case ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ECONNRESET, EPIPE, ENOTCONN: return .connectionRefused
            case ETIMEDOUT: return .timeout
            default: return .other
            }
        case Code.auth, Code.aclDenied: return .notAuthorized
        case Code.protocolViolation, Code.invalid, Code.payloadSize, Code.notSupported, 18, 21, 22, 24, 25, 28, 29:
            return .protocolError
        case Code.timeout: return .timeout
        default: return .other
        }
    }

    /// An error for a refused CONNACK. 3.1.1 return codes are 1...5; MQTT 5 reason codes are 0x80 and up.
    static func connack(_ code: Int32, version: MQTTProtocolVersion, context: String) -> MQTTError {
        let text = version != .v311 ? libraryText(libmosquitto.mosquitto_reason_string(code)) : libraryText(libmosquitto.mosquitto_connack_string(code))
        let refusedCredentials: Bool
        switch version {
        case .v311: refusedCredentials = code == 4 || code == 5
        case .v5, .auto: refusedCredentials = code == 0x86 || code == 0x87 || code == 0x8C  // bad user/password, not authorized, bad auth method
        }
        return MQTTError(kind: refusedCredentials ? .notAuthorized : .connectionRefused, code: code, message: text, context: context)
    }

    /// An error for an MQTT 5 reason code (or 0x80, the 3.1.1 SUBACK failure) in an acknowledgement.
    static func reason(_ code: Int32, context: String) -> MQTTError {
        let kind: Kind = code == 0x87 ? .notAuthorized : .protocolError
        return MQTTError(kind: kind, code: code, message: libraryText(libmosquitto.mosquitto_reason_string(code)), context: context)
    }

    static func notConnected(_ context: String) -> MQTTError {
        MQTTError(kind: .notConnected, code: Code.noConnection, message: "The client is not connected.", context: context)
    }

    static func closed(_ context: String) -> MQTTError {
        MQTTError(kind: .closed, code: Code.noConnection, message: "The client was shut down.", context: context)
    }
}
