internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

extension MosquittoHandle {
    /// Creates a handle and applies the configuration; `userData` comes back in every callback.
    static func make(
        _ configuration: MQTTConfiguration, _ address: BrokerAddress, userData: UnsafeMutableRawPointer
    ) throws(MQTTError) -> MosquittoHandle {
        try MosquittoLibrary.ensureInitialised()
        let id = configuration.clientID.isEmpty ? nil : configuration.clientID
        guard let pointer = libmosquitto.mosquitto_new(id, configuration.cleanSession, userData) else {
            let reason = errno == EINVAL ? "a persistent session (cleanSession false) needs a client ID" : "out of memory"
            throw MQTTError(kind: .other, code: MQTTError.Code.invalid, message: reason, context: "creating the client")
        }
        let handle = MosquittoHandle(pointer: pointer)
        do {
            try handle.apply(configuration, address)
        } catch {
            libmosquitto.mosquitto_destroy(pointer)
            throw error
        }
        return handle
    }

    /// Returns the handle to its just-created state (closing any half-open socket) and applies the configuration again.
    func reset(_ configuration: MQTTConfiguration, _ address: BrokerAddress, userData: UnsafeMutableRawPointer) throws(MQTTError) {
        let id = configuration.clientID.isEmpty ? nil : configuration.clientID
        let rc = libmosquitto.mosquitto_reinitialise(pointer, id, configuration.cleanSession, userData)
        guard rc == 0 else { throw MQTTError.library(rc, context: "resetting the client") }
        try apply(configuration, address)
    }

    func destroy() {
        libmosquitto.mosquitto_destroy(pointer)
    }

    private func apply(_ configuration: MQTTConfiguration, _ address: BrokerAddress) throws(MQTTError) {
        func check(_ rc: Int32, _ context: String, kind: MQTTError.Kind? = nil) throws(MQTTError) {
            if rc != 0 { throw MQTTError.library(rc, errno: errno, context: context, kind: kind) }
        }
        guard configuration.keepAlive >= 5, configuration.keepAlive <= 65535 else {
            throw MQTTError(
                kind: .other, code: MQTTError.Code.invalid, message: "keepAlive must be 5...65535 seconds",
                context: "keepAlive \(configuration.keepAlive)")
        }
        // The network thread and callers' threads both use the handle: make libmosquitto take its locks.
        try check(libmosquitto.mosquitto_threaded_set(pointer, true), "enabling thread safety")
        // MQTT packets are small and often follow one another (a PUBACK, then an answer): with Nagle's algorithm
        // the second waits for the peer's delayed ACK, about 40 ms on Linux, on every request/answer round trip.
        try check(libmosquitto.mosquitto_int_option(pointer, MOSQ_OPT_TCP_NODELAY, 1), "disabling Nagle's algorithm")
        guard (1...65535).contains(configuration.sendMaximum) else {
            throw MQTTError(
                kind: .other, code: MQTTError.Code.invalid, message: "sendMaximum must be 1...65535",
                context: "sendMaximum \(configuration.sendMaximum)")
        }
        try check(libmosquitto.mosquitto_int_option(pointer, MOSQ_OPT_SEND_MAXIMUM, Int32(configuration.sendMaximum)),
                  "setting the send maximum")

        if configuration.username != nil || configuration.password != nil {
            try check(
                libmosquitto.mosquitto_username_pw_set(pointer, configuration.username ?? "", configuration.password),
                "setting username and password")
        }
        if let will = configuration.will {
            let rc = will.payload.withUnsafeBytes { bytes in
                libmosquitto.mosquitto_will_set(
                    pointer, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain)
            }
            try check(rc, "setting the will on \"\(will.topic)\"")
        }
        if configuration.usesTLS(address) {
            try applyTLS(configuration.tls ?? MQTTTLS())
        }
        Callbacks.install(on: pointer)
    }

    private func applyTLS(_ tls: MQTTTLS) throws(MQTTError) {
        // mosquitto_tls_set only checks that the files open; bad contents or a failed verification show up at connect.
        for path in [tls.caFile, tls.certFile, tls.keyFile].compactMap({ $0 }) where access(path, R_OK) != 0 {
            throw MQTTError(
                kind: .tls, code: MQTTError.Code.invalid, message: String(cString: strerror(errno)),
                context: "TLS file \(path)")
        }
        if (tls.certFile == nil) != (tls.keyFile == nil) {
            throw MQTTError(
                kind: .tls, code: MQTTError.Code.invalid, message: "certFile and keyFile must be given together",
                context: "TLS client certificate")
        }
        let caPath: String? = tls.caFile == nil ? "/etc/ssl/certs" : nil
        let rc = libmosquitto.mosquitto_tls_set(pointer, tls.caFile, caPath, tls.certFile, tls.keyFile, nil)
        if rc != 0 { throw MQTTError.library(rc, errno: errno, context: "setting up TLS", kind: .tls) }
        if !tls.verifyHostname {
            let rc = libmosquitto.mosquitto_tls_insecure_set(pointer, true)
            if rc != 0 { throw MQTTError.library(rc, context: "disabling TLS hostname verification", kind: .tls) }
        }
    }

    /// Sets what one connection attempt speaks: the protocol version (`.v311` or `.v5`) and, under MQTT 5, the
    /// CONNECT properties (the session expiry). Called by the network thread before each attempt, since each broker
    /// of a list may speak another version.
    ///
    /// libmosquitto 2.0 has no asynchronous connect that takes CONNECT properties, but it keeps the properties given
    /// to `mosquitto_connect_bind_v5` and sends them on every later (re)connect, asynchronous ones included. That
    /// function stores them (or, given none, drops those it kept: under 3.1.1 a kept list fails every connect with
    /// MOSQ_ERR_NOT_SUPPORTED) before it validates the port, so an invalid port stores them without opening a socket.
    func prepare(version: MQTTProtocolVersion, sessionExpiry: UInt32?, keepAlive: Int) throws(MQTTError) {
        let option = version == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        let set = libmosquitto.mosquitto_int_option(pointer, MOSQ_OPT_PROTOCOL_VERSION, option)
        if set != 0 { throw MQTTError.library(set, context: "setting the protocol version") }
        var properties = PropertyList()
        if version == .v5, let sessionExpiry {
            let added = properties.addInt32(MQTT_PROP_SESSION_EXPIRY_INTERVAL, sessionExpiry)
            if added != 0 { throw MQTTError.library(added, context: "building the session expiry property") }
        }
        let rc = libmosquitto.mosquitto_connect_bind_v5(pointer, "localhost", -1, Int32(keepAlive), nil, properties.pointer)
        if rc != MQTTError.Code.invalid {
            throw MQTTError.library(rc, context: "storing the CONNECT properties")
        }
    }
}
