import Foundation
import MQTT
import Synchronization
import Testing
import TestSupport

/// Answers published from the message handler (`publishFromHandler`): encoded by the client itself and written
/// together at the end of a network turn on plain TCP, through libmosquitto over TLS and where the client leaves a
/// check to the library. Either way every answer reaches subscribers whole and in order.
@Suite("Answers from the message handler", .timeLimit(.minutes(2)))
struct HandlerAnswerTests {
    @Test("a backlog's answers all arrive, in order and whole, and the connection stays up",
          arguments: [MQTTProtocolVersion.v311, .v5])
    func backlogAnswered(version: MQTTProtocolVersion) async throws {
        var options = MosquittoBroker.Options()
        options.extraConfig = "max_queued_messages 5000\n"  // the backlog (mosquitto keeps 1,000 by default)
        try await withBroker(options) { broker in
            let count = 2_000
            let answered = try await answerEach(count: count, broker: broker, configuration: {
                testConfiguration(broker.url, $0, version: version)
            }) { message in
                let index = Int(message.text) ?? 0
                return ("answers/\(index % 7)", expectedAnswer(index))
            }
            #expect(answered.lost == 0)
            for topic in 0..<7 {
                let expected = (0..<count).filter { $0 % 7 == topic }.map(expectedAnswer)
                #expect(answered.received.filter { $0.topic == "answers/\(topic)" }.map(\.payload) == expected)
            }
            #expect(!answered.reconnected)
        }
    }

    @Test("over TLS, and on a topic the client leaves to the library, answers arrive too")
    func libraryPaths() async throws {
        var options = MosquittoBroker.Options()
        options.tls = true
        try await withBroker(options) { broker in
            let certificates = try #require(broker.certificates)
            let tlsURL = try #require(broker.tlsURL)
            let answered = try await answerEach(count: 200, broker: broker, configuration: { clientID in
                var configuration = testConfiguration(tlsURL, clientID)
                configuration.tls = MQTTTLS(caFile: certificates.caFile, certFile: certificates.clientCertFile,
                                            keyFile: certificates.clientKeyFile)
                return configuration
            }) { message in ("answers/tls", message.payload) }
            #expect(answered.received.map(\.payload) == (0..<200).map { Array("\($0)".utf8) })

            // Plain TCP, but a topic outside printable ASCII: libmosquitto checks and sends it.
            let mixed = try await answerEach(count: 200, broker: broker, configuration: {
                testConfiguration(broker.url, $0)
            }) { message in
                let index = Int(message.text) ?? 0
                return (index % 2 == 0 ? "answers/ü" : "answers/u", message.payload)
            }
            #expect(mixed.received.filter { $0.topic == "answers/ü" }.map(\.payload)
                    == stride(from: 0, to: 200, by: 2).map { Array("\($0)".utf8) })
            #expect(mixed.received.filter { $0.topic == "answers/u" }.map(\.payload)
                    == stride(from: 1, to: 200, by: 2).map { Array("\($0)".utf8) })
        }
    }

    @Test("an answer over an MQTT 5 broker's maximum packet size is refused, and the connection stays up")
    func overMaximumPacketSize() async throws {
        var options = MosquittoBroker.Options()
        options.extraConfig = "max_packet_size 2000\n"
        try await withBroker(options) { broker in
            let answered = try await answerEach(count: 20, broker: broker, configuration: {
                testConfiguration(broker.url, $0, version: .v5)
            }) { message in
                let index = Int(message.text) ?? 0
                return ("answers/size", [UInt8](repeating: 0x62, count: index % 2 == 0 ? 100 : 5_000))
            }
            #expect(answered.received.count == 10)
            #expect(answered.received.allSatisfy { $0.payload.count == 100 })
            let errors = answered.refusals
            #expect(errors.count == 10)
            #expect(errors.allSatisfy { $0.code == MQTTError.Code.payloadSize || $0.message.contains("large") },
                    "\(errors.first.map { "\($0)" } ?? "")")
            #expect(!answered.reconnected)
        }
    }

    @Test("a full socket leaves answers half written; the rest follows once it drains, byte for byte")
    func halfWritten() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        var small: Int32 = 4_096
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var answers = HandlerAnswers()
        let payload = (0..<100_000).map { UInt8($0 % 251) }
        try answers.append(topic: "a/b", payload: payload, v5: false, maximumPacketSize: nil)
        try answers.append(topic: "c", payload: [1, 2, 3], v5: true, maximumPacketSize: nil)
        #expect(answers.write(to: pair[0]) == .pending)
        #expect(answers.isHalfWritten)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        func drain() {
            while case let got = recv(pair[1], &buffer, buffer.count, Int32(MSG_DONTWAIT)), got > 0 {
                received += buffer[0..<got]
            }
        }
        var rounds = 0
        while !answers.isEmpty, rounds < 100_000 {
            rounds += 1
            drain()
            _ = answers.write(to: pair[0])
        }
        drain()
        // MQTT 3.1.1: PUBLISH QoS 0, remaining length 100,005 in three bytes, topic "a/b", the payload.
        let first: [UInt8] = [0x30, 0xA5, 0x8D, 0x06, 0x00, 0x03] + Array("a/b".utf8) + payload
        // MQTT 5: remaining length 2 + 1 + 1 (no properties) + 3.
        let second: [UInt8] = [0x30, 0x07, 0x00, 0x01, UInt8(ascii: "c"), 0x00, 1, 2, 3]
        #expect(received == first + second)
        #expect(answers.isEmpty && !answers.isHalfWritten)
    }

    @Test("what the client leaves to the library, and a buffer over its limit, are refused before anything is kept")
    func refusals() {
        var answers = HandlerAnswers()
        func refusal(_ topic: String, _ payload: [UInt8] = [], maximum: UInt32? = nil) -> HandlerAnswers.Refusal? {
            do {
                try answers.append(topic: topic, payload: payload, v5: true, maximumPacketSize: maximum)
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal("") == .libraryDecides)
        #expect(refusal("a/+/b") == .libraryDecides)
        #expect(refusal("a/#") == .libraryDecides)
        #expect(refusal("tête") == .libraryDecides)
        #expect(refusal("a\u{1}b") == .libraryDecides)
        #expect(refusal(String(repeating: "t", count: 65_536)) == .libraryDecides)
        // 1 + 1 + 2 + 1 + 1 (no properties) + 10 = 16 bytes.
        #expect(refusal("t", [UInt8](repeating: 0, count: 10), maximum: 15) == .libraryDecides)
        #expect(answers.isEmpty)
        #expect(refusal("t", [UInt8](repeating: 0, count: 10), maximum: 16) == nil)
        let big = [UInt8](repeating: 0, count: HandlerAnswers.limit / 2)
        #expect(refusal("t", big) == nil)
        #expect(refusal("t", big) == .full)
    }
}

/// The answer to question `index`: payloads of every length class of MQTT's remaining length (one, two and three
/// bytes of it).
private func expectedAnswer(_ index: Int) -> [UInt8] {
    Array("answer \(index) ".utf8) + [UInt8](repeating: 0x61, count: index % 10 == 0 ? 20_000 : index % 200)
}

private struct Answered {
    var received: [MQTTMessage]
    var states: [MQTTConnectionState]
    /// What `publishFromHandler` threw.
    var refusals: [MQTTError]
    var lost: Int

    /// Whether the answering client lost its connection at any time.
    var reconnected: Bool { states.contains { if case .reconnecting = $0 { true } else { false } } }
}

/// Publishes `count` QoS 1 messages ("0", "1", …) at a client that answers each from its handler with `answer`'s
/// topic and payload; returns what a subscriber to `answers/#` received (once the answers stop coming) and the
/// answering client's states and what it refused.
private func answerEach(
    count: Int, broker: MosquittoBroker, configuration: @escaping (String) -> MQTTConfiguration,
    answer: @escaping @Sendable (MQTTMessage) -> (String, [UInt8])
) async throws -> Answered {
    let listener = try await connectedClient(testConfiguration(broker.url))
    let inbox = Inbox(listener)
    try await listener.subscribe("answers/#", qos: .atMostOnce)
    let client = Mutex<MQTTClient?>(nil)
    let topic = uniqueName("questions")
    // A persistent session: the questions wait for the answering client as a backlog, then come many per turn.
    var answering = configuration(uniqueName("answering"))
    answering.cleanSession = false
    answering.sessionExpiry = 300
    let first = try await connectedClient(answering, streamMessages: false)
    try await first.subscribe(topic, qos: .atLeastOnce)
    await first.disconnect()
    let publisher = try await connectedClient(testConfiguration(broker.url))
    // In order, many in flight at once: one at a time, a loaded machine took minutes over a backlog.
    for start in stride(from: 0, to: count, by: 500) {
        let batch = (start..<min(count, start + 500)).map { (topic: topic, payload: Array("\($0)".utf8)) }
        for outcome in await publisher.publish(inOrder: batch, qos: .atLeastOnce) { try outcome.get() }
    }
    await publisher.disconnect()
    let handled = Atomic<Int>(0)
    let refusals = Mutex<[MQTTError]>([])
    let answerer = try MQTTClient(configuration: answering, streamMessages: false) { message in
        let (topic, payload) = answer(message)
        do throws(MQTTError) {
            try client.withLock { $0 }?.publishFromHandler(topic, payload: payload)
        } catch {
            refusals.withLock { $0.append(error) }
        }
        handled.add(1, ordering: .relaxed)
    }
    client.withLock { $0 = answerer }
    let states = StateLog(answerer)
    try await answerer.connect()
    try await waitUntil(timeout: .seconds(60)) { handled.load(ordering: .relaxed) >= count }
    let expected = count - refusals.withLock { $0.count }
    try await waitUntil(timeout: .seconds(30)) { inbox.messages.count >= expected }
    // Nothing more comes (no answer twice).
    try await Task.sleep(for: .milliseconds(200))
    await answerer.disconnect()
    await listener.disconnect()
    let received = inbox.messages
    return Answered(received: received, states: states.states, refusals: refusals.withLock { $0 },
                    lost: expected - received.count)
}
