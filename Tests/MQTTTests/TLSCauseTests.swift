import MQTT
import Testing
import TestSupport

/// Every TLS failure used to read "A TLS error occurred"; each cause must say what failed.
@Suite("TLS failures say what failed", .timeLimit(.minutes(1)))
struct TLSCauseTests {
    enum Case: Sendable, CustomTestStringConvertible {
        case unknownCA, wrongHost, expired, clientCertificateMissing, clientCertificateFromOtherCA

        var testDescription: String {
            switch self {
            case .unknownCA: "a CA file that did not sign the broker's certificate"
            case .wrongHost: "a broker certificate for another host name"
            case .expired: "an expired broker certificate"
            case .clientCertificateMissing: "no client certificate where the broker requires one"
            case .clientCertificateFromOtherCA: "a client certificate the broker's CA did not sign"
            }
        }

        /// Words the error must contain.
        var expected: String {
            switch self {
            case .unknownCA: "unknown CA"
            case .wrongHost: "host name mismatch"
            case .expired: "expired"
            case .clientCertificateMissing: "requires a client certificate"
            case .clientCertificateFromOtherCA: "refused the client certificate"
            }
        }
    }

    @Test("the error names the cause", arguments: [
        Case.unknownCA, .wrongHost, .expired, .clientCertificateMissing, .clientCertificateFromOtherCA,
    ])
    func causeIsNamed(_ failure: Case) async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        switch failure {
        case .wrongHost: options.serverCertificate = .wrongHost
        case .expired: options.serverCertificate = .expired
        default: break
        }
        try await withBroker(options) { broker in
            let certificates = try #require(broker.certificates)
            var tls = MQTTTLS(caFile: certificates.caFile, certFile: certificates.clientCertFile,
                              keyFile: certificates.clientKeyFile)
            switch failure {
            case .unknownCA: tls.caFile = certificates.wrongCAFile
            case .clientCertificateMissing: tls.certFile = nil; tls.keyFile = nil
            case .clientCertificateFromOtherCA:
                // Signed by the other CA: make it with the same tool, from that CA's key.
                let other = try TestCertificates.make(in: try makeTemporaryDirectory("other-ca"))
                tls.certFile = other.clientCertFile
                tls.keyFile = other.clientKeyFile
            default: break
            }
            var configuration = testConfiguration(try #require(broker.tlsURL))
            configuration.tls = tls
            let client = try MQTTClient(configuration: configuration)
            let error = await mqttError { try await client.connect() }
            #expect(error?.kind == .tls, "got \(String(describing: error))")
            #expect(error?.message.contains(failure.expected) == true, "got \(String(describing: error))")
            #expect(error?.message.contains("A TLS error occurred") == false)
            await client.disconnect()
        }
    }

    @Test("without libmosquitto's log lines, the agent's own handshake still finds the cause",
          arguments: [Case.clientCertificateMissing, .unknownCA, .wrongHost])
    func causeFromTheHandshakeAlone(_ failure: Case) async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        if case .wrongHost = failure { options.serverCertificate = .wrongHost }
        try await withBroker(options) { broker in
            let certificates = try #require(broker.certificates)
            var tls = MQTTTLS(caFile: certificates.caFile, certFile: certificates.clientCertFile,
                              keyFile: certificates.clientKeyFile)
            switch failure {
            case .clientCertificateMissing: tls.certFile = nil; tls.keyFile = nil
            case .unknownCA: tls.caFile = certificates.wrongCAFile
            default: break
            }
            // Under load the broker's alert can be lost with the connection (an EPROTO instead of a TLS error,
            // nothing in the log): the cause must come from the handshake.
            let port = try #require(broker.tlsPort)
            let cause = TLSDiagnosis.explain(log: [], host: "127.0.0.1", port: port, tls: tls, timeout: .seconds(3))
            #expect(cause?.contains(failure.expected) == true, "got \(String(describing: cause))")
        }
    }

    @Test("mqtts:// to a plain MQTT port says the broker does not speak TLS there")
    func tlsToPlainPort() async throws {
        try await withBroker { broker in
            var configuration = testConfiguration("mqtts://127.0.0.1:\(broker.port)")
            configuration.tls = MQTTTLS(caFile: nil)
            let client = try MQTTClient(configuration: configuration)
            let error = await mqttError { try await client.connect() }
            #expect(error?.kind == .tls, "got \(String(describing: error))")
            #expect(error?.message.contains("does not speak TLS") == true, "got \(String(describing: error))")
            await client.disconnect()
        }
    }

    @Test("mqtt:// to a TLS listener says the broker expects TLS, and fails instead of retrying")
    func plainToTLSPort() async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        try await withBroker(options) { broker in
            let client = try MQTTClient(configuration: testConfiguration("mqtt://127.0.0.1:\(try #require(broker.tlsPort))"))
            let error = await mqttError { try await client.connect() }
            #expect(error?.kind == .tls, "got \(String(describing: error))")
            #expect(error?.message.contains("expects TLS") == true, "got \(String(describing: error))")
            await client.disconnect()
        }
    }
}
