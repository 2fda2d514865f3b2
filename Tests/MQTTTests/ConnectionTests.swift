import Foundation
import MQTT
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("Connecting: credentials, TLS, unreachable brokers", .timeLimit(.minutes(1)))
struct ConnectionTests {
    static let users = ["agent": "s3cret", "device-1": "pw-1"]

    @Test("the right password is accepted", .timeLimit(.minutes(1)), arguments: [MQTTProtocolVersion.v311, .v5])
    func passwordAccepted(version: MQTTProtocolVersion) async throws {
        var options = MosquittoBroker.Options()
        options.users = Self.users
        try await withBroker(options) { broker in
            var configuration = testConfiguration(broker.url, version: version)
            configuration.username = "agent"
            configuration.password = "s3cret"
            let client = try await connectedClient(configuration)
            #expect(client.state == .connected)
            let inbox = Inbox(client)
            try await client.subscribe("auth/check", qos: .atLeastOnce)
            try await client.publish("auth/check", "hello")
            #expect(try await inbox.first(on: "auth/check").text == "hello")
            await client.disconnect()
        }
    }

    @Test(
        "a wrong password or no credentials fail connect() with .notAuthorized, once, without retrying",
        .timeLimit(.minutes(1)), arguments: [MQTTProtocolVersion.v311, .v5], [true, false])
    func passwordRefused(version: MQTTProtocolVersion, sendCredentials: Bool) async throws {
        var options = MosquittoBroker.Options()
        options.users = Self.users
        try await withBroker(options) { broker in
            let clientID = uniqueName("refused")
            var configuration = testConfiguration(broker.url, clientID, version: version)
            if sendCredentials {
                configuration.username = "agent"
                configuration.password = "wrong"
            }
            // An hour: a refusal that waited for connectTimeout would run into the test's time limit.
            configuration.connectTimeout = .seconds(3600)
            let client = try MQTTClient(configuration: configuration)
            let error = await mqttError { try await client.connect() }

            #expect(error?.kind == .notAuthorized)
            #expect(error?.message.isEmpty == false)
            #expect(client.state == .idle)
            // No retry loop: the broker refused exactly one attempt, even a while later.
            try await Task.sleep(for: .milliseconds(700))
            let refusals = broker.log().components(separatedBy: "\n").filter { $0.contains("not authorised") }
            #expect(refusals.count == 1, "broker log:\n\(broker.log())")
            await client.disconnect()
        }
    }

    @Test("TLS with the test CA and a client certificate connects and carries messages", .timeLimit(.minutes(1)))
    func tlsSucceeds() async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        try await withBroker(options) { broker in
            let certificates = try #require(broker.certificates)
            var configuration = testConfiguration(try #require(broker.tlsURL))
            configuration.tls = MQTTTLS(
                caFile: certificates.caFile, certFile: certificates.clientCertFile, keyFile: certificates.clientKeyFile)
            let client = try await connectedClient(configuration)
            let inbox = Inbox(client)
            try await client.subscribe("tls/check", qos: .exactlyOnce)
            try await client.publish("tls/check", "over TLS", qos: .exactlyOnce)
            #expect(try await inbox.first(on: "tls/check").text == "over TLS")
            await client.disconnect()
        }
    }

    @Test("a broker certificate from an unknown CA is refused with .tls", .timeLimit(.minutes(1)))
    func wrongCARefused() async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        try await withBroker(options) { broker in
            let certificates = try #require(broker.certificates)
            var configuration = testConfiguration(try #require(broker.tlsURL))
            configuration.tls = MQTTTLS(
                caFile: certificates.wrongCAFile, certFile: certificates.clientCertFile,
                keyFile: certificates.clientKeyFile)
            let client = try MQTTClient(configuration: configuration)
            let error = await mqttError { try await client.connect() }
            #expect(error?.kind == .tls, "got \(String(describing: error))")
            #expect(client.state == .idle)
            await client.disconnect()
        }
    }

    @Test("unreadable TLS files are reported by init with .tls", .timeLimit(.minutes(1)))
    func missingCAFile() throws {
        var configuration = MQTTConfiguration(url: "mqtts://127.0.0.1:8883", clientID: "x")
        configuration.tls = MQTTTLS(caFile: "/nonexistent/ca.crt")
        let error = #expect(throws: MQTTError.self) { _ = try MQTTClient(configuration: configuration) }
        #expect(error?.kind == .tls)
        #expect(error?.context.contains("/nonexistent/ca.crt") == true)
    }

    @Test("URLs other than mqtt:// and mqtts:// are refused with .invalidURL", .timeLimit(.minutes(1)),
          arguments: ["http://127.0.0.1:1883", "127.0.0.1:1883", "mqtt://", "mqtt://host:0", "mqtt://host:99999",
                      "mqtt://host:1883/path"])
    func invalidURL(url: String) throws {
        let error = #expect(throws: MQTTError.self) {
            _ = try MQTTClient(configuration: MQTTConfiguration(url: url, clientID: "x"))
        }
        #expect(error?.kind == .invalidURL)
    }

    @Test("a closed port fails quickly with .connectionRefused", .timeLimit(.minutes(1)))
    func closedPort() async throws {
        let port = try freeLoopbackPort()  // nothing listens there
        var configuration = testConfiguration("mqtt://127.0.0.1:\(port)")
        // An hour: a refused connection that waited for the timeout would run into the test's time limit.
        configuration.connectTimeout = .seconds(3600)
        let client = try MQTTClient(configuration: configuration)
        let error = await mqttError { try await client.connect() }
        #expect(error?.kind == .connectionRefused, "got \(String(describing: error))")
        #expect(client.state == .idle)
        await client.disconnect()
    }

    @Test("a host that accepts TCP but never answers fails with .timeout after connectTimeout", .timeLimit(.minutes(1)))
    func unresponsiveBroker() async throws {
        // A listening socket that never accepts: the kernel completes the TCP handshake, nobody sends CONNACK.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 && listen(listener, 8) == 0
            }
        }
        try #require(listening)
        var configuration = testConfiguration("mqtt://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")
        configuration.connectTimeout = .seconds(1)
        let client = try MQTTClient(configuration: configuration)
        let started = ContinuousClock.now
        let error = await mqttError { try await client.connect() }
        let elapsed = ContinuousClock.now - started
        #expect(error?.kind == .timeout, "got \(String(describing: error))")
        // Bounded, not timed: on a loaded machine (the suite run twice at once) the attempt may end well after 1 s.
        #expect(elapsed >= .seconds(1) && elapsed < .seconds(30))
        await client.disconnect()
    }

    @Test("publish and subscribe need a connection: .notConnected before connect, .closed after disconnect",
          .timeLimit(.minutes(1)))
    func operationsNeedConnection() async throws {
        try await withBroker { broker in
            let client = try MQTTClient(configuration: testConfiguration(broker.url))
            #expect(await mqttError { try await client.publish("t", "x", qos: .atMostOnce) }?.kind == .notConnected)
            #expect(await mqttError { try await client.publish("t", "x", qos: .atLeastOnce) }?.kind == .notConnected)
            #expect(await mqttError { try await client.subscribe("t", qos: .atLeastOnce) }?.kind == .notConnected)

            try await client.connect()
            try await client.publish("t", "x")
            await client.disconnect()
            #expect(await mqttError { try await client.publish("t", "x") }?.kind == .closed)
            #expect(await mqttError { try await client.connect() }?.kind == .closed)
        }
    }

    @Test("connect() can be retried after a failed first attempt", .timeLimit(.minutes(1)))
    func connectRetriedByCaller() async throws {
        try await withBroker { broker in
            broker.kill()
            let client = try MQTTClient(configuration: testConfiguration(broker.url))
            #expect(await mqttError { try await client.connect() }?.kind == .connectionRefused)
            try await broker.restart()
            try await client.connect()
            #expect(client.state == .connected)
            await client.disconnect()
        }
    }

    @Test("disconnect is idempotent, finishes both streams, and ends in .stopped", .timeLimit(.minutes(1)))
    func disconnectFinishesStreams() async throws {
        try await withBroker { broker in
            let client = try await connectedClient(testConfiguration(broker.url))
            let inbox = Inbox(client)
            let states = StateLog(client)
            try await client.subscribe("bye", qos: .atLeastOnce)

            async let first: Void = client.disconnect()
            async let second: Void = client.disconnect()
            _ = await (first, second)
            await client.disconnect()

            #expect(client.state == .stopped)
            try await waitUntil { inbox.isFinished && states.isFinished }
            #expect(states.states.first == .connected)
            #expect(states.states.last == .stopped)
            // A late observer gets the final state and an already finished stream.
            var late: [MQTTConnectionState] = []
            for await state in client.states { late.append(state) }
            #expect(late == [.stopped])
        }
    }
}
