internal import CLazyLibraries
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Says what failed when a connection attempt fails in TLS (or because of it): libmosquitto reports every TLS
/// failure as the same "A TLS error occurred". The causes come from two places: the OpenSSL errors libmosquitto
/// logs (alerts the broker sent, a handshake that met no TLS), and, for a certificate that did not verify, one
/// handshake of our own against the broker that reads OpenSSL's verification result (unknown CA, expired, host name).
package enum TLSDiagnosis {
    /// The cause of a failed attempt to a TLS broker, or nil to keep the library's error.
    package static func explain(log: [String], host: String, port: Int, tls: MQTTTLS, timeout: Duration) -> String? {
        let text = log.joined(separator: "\n").lowercased()
        if let refused = clientCertificateRefusal(text) { return refused }
        if notTLS(text) { return notSpeakingTLS }
        if text.contains("host name verification failed") {
            return "host name mismatch: the broker's certificate does not name \(host)"
        }
        switch probe(host: host, port: port, tls: tls, timeout: timeout) {
        case .verified(let result):
            if let failure = verificationFailure(result, host: host) { return failure }
        case .noTLS:
            return notSpeakingTLS
        case .failed(let reason):
            if let refused = clientCertificateRefusal(reason.lowercased()) { return refused }
        case .unreachable:
            return nil
        }
        return log.last.map { "TLS handshake failed: \($0)" }
    }

    /// Whether a plain (`mqtt://`) port that closed the connection before CONNACK is really a TLS listener.
    static func expectsTLS(host: String, port: Int, timeout: Duration) -> Bool {
        switch probe(host: host, port: port, tls: MQTTTLS(verifyHostname: false), timeout: timeout) {
        case .verified: true
        case .failed(let reason): reason.lowercased().contains("alert")
        case .noTLS, .unreachable: false
        }
    }

    static let notSpeakingTLS =
        "the broker did not answer in TLS: this port does not speak TLS (for a plain MQTT port use an mqtt:// URL)"

    private static func clientCertificateRefusal(_ text: String) -> String? {
        let alerts = ["alert certificate required", "alert bad certificate", "alert unknown ca",
                      "alert certificate unknown", "alert certificate expired", "alert handshake failure",
                      "alert access denied", "alert certificate revoked", "alert unsupported certificate"]
        guard let alert = alerts.first(where: text.contains) else { return nil }
        if alert == "alert certificate required" {
            return "the broker requires a client certificate: set certFile and keyFile"
        }
        return "the broker refused the client certificate (TLS \(alert.replacing("alert ", with: "")))"
    }

    private static func notTLS(_ text: String) -> Bool {
        ["wrong version number", "unexpected eof", "packet length too long", "record layer failure",
         "http request", "unknown protocol"].contains(where: text.contains)
    }

    private static func verificationFailure(_ result: Int, host: String) -> String? {
        switch Int32(result) {
        case X509_V_OK:
            return nil
        case X509_V_ERR_CERT_HAS_EXPIRED:
            return "the broker's certificate has expired"
        case X509_V_ERR_CERT_NOT_YET_VALID:
            return "the broker's certificate is not valid yet (check this machine's clock)"
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
             X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED:
            return "the broker's certificate is not trusted: no CA in caFile signed it (unknown CA)"
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            return "host name mismatch: the broker's certificate does not name \(host)"
        default:
            return "the broker's certificate did not verify: \(libraryText(libssl.X509_verify_cert_error_string(result)))"
        }
    }

    private enum ProbeResult {
        /// The handshake completed; OpenSSL's verification result (X509_V_OK when the certificate is fine).
        case verified(Int)
        /// The peer answered, but not in TLS.
        case noTLS
        /// The handshake failed; OpenSSL's reason.
        case failed(String)
        /// No TCP connection.
        case unreachable
    }

    /// One TLS handshake that verifies nothing itself (so that it completes) and reads what verification found.
    private static func probe(host: String, port: Int, tls: MQTTTLS, timeout: Duration) -> ProbeResult {
        // OpenSSL is loaded on first use (CLazyLibraries.h); without it there is no handshake to make.
        if let failure = thing_agent_load_openssl() { return .failed(String(cString: failure)) }
        guard let fd = connectedSocket(host: host, port: port, timeout: timeout) else { return .unreachable }
        defer { close(fd) }
        guard let context = libssl.SSL_CTX_new(libssl.TLS_client_method()) else { return .failed("out of memory") }
        defer { libssl.SSL_CTX_free(context) }
        if let caFile = tls.caFile {
            _ = libssl.SSL_CTX_load_verify_locations(context, caFile, nil)
        } else {
            _ = libssl.SSL_CTX_load_verify_locations(context, nil, "/etc/ssl/certs")
        }
        if let certFile = tls.certFile, let keyFile = tls.keyFile {
            _ = libssl.SSL_CTX_use_certificate_chain_file(context, certFile)
            _ = libssl.SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM)
        }
        libssl.SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        guard let ssl = libssl.SSL_new(context) else { return .failed("out of memory") }
        defer { libssl.SSL_free(ssl) }
        if tls.verifyHostname {
            var address = in6_addr()
            let isAddress = inet_pton(AF_INET, host, &address) == 1 || inet_pton(AF_INET6, host, &address) == 1
            _ = isAddress ? libssl.X509_VERIFY_PARAM_set1_ip_asc(libssl.SSL_get0_param(ssl), host) : libssl.SSL_set1_host(ssl, host)
        }
        _ = libssl.SSL_set_fd(ssl, fd)
        libssl.ERR_clear_error()
        if libssl.SSL_connect(ssl) == 1 {
            let result = libssl.SSL_get_verify_result(ssl)
            // Under TLS 1.3 the client's side of the handshake ends before the broker has checked the client's
            // certificate: a refusal comes as an alert just after. Wait a moment for it (a broker that accepted
            // says nothing until it gets a CONNECT).
            if result == X509_V_OK, let alert = alertAfterHandshake(ssl, fd) { return .failed(alert) }
            _ = libssl.SSL_shutdown(ssl)
            return .verified(Int(result))
        }
        let code = libssl.ERR_get_error()
        guard code != 0 else { return .noTLS }  // the peer closed without a TLS answer
        let reason = libssl.ERR_reason_error_string(code).map { String(cString: $0) } ?? "TLS error \(code)"
        return notTLS(reason.lowercased()) ? .noTLS : .failed(reason)
    }

    /// The reason of an alert the broker sends within a second of the handshake, if it sends one.
    private static func alertAfterHandshake(_ ssl: OpaquePointer, _ fd: Int32) -> String? {
        var limit = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        libssl.ERR_clear_error()
        var byte: UInt8 = 0
        guard libssl.SSL_read(ssl, &byte, 1) <= 0 else { return nil }
        let code = libssl.ERR_get_error()
        guard code != 0, let reason = libssl.ERR_reason_error_string(code).map({ String(cString: $0) }),
              reason.lowercased().contains("alert") else { return nil }
        return reason
    }

    /// A blocking TCP socket with send/receive timeouts (Linux applies the send timeout to connect too).
    private static func connectedSocket(host: String, port: Int, timeout: Duration) -> Int32? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &results) == 0, let first = results else { return nil }
        defer { freeaddrinfo(results) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return nil }
        let seconds = max(timeout.components.seconds, 1)
        var limit = timeval(tv_sec: Int(seconds), tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}
