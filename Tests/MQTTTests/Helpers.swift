import MQTT
import Synchronization
import TestSupport

/// Collects what a client's `messages` stream yields, so tests can wait for messages with a deadline.
final class Inbox: Sendable {
    private let received = Mutex<[MQTTMessage]>([])
    private let finished = Atomic<Bool>(false)

    /// Starts consuming `client.messages` (its single consumer).
    init(_ client: MQTTClient) {
        let stream = client.messages
        Task { [self] in
            for await message in stream {
                self.received.withLock { $0.append(message) }
            }
            self.finished.store(true, ordering: .releasing)
        }
    }

    var messages: [MQTTMessage] { received.withLock { $0 } }
    var isFinished: Bool { finished.load(ordering: .acquiring) }

    /// Waits until `count` messages arrived and returns them.
    @discardableResult
    func waitFor(count: Int, timeout: Duration = .seconds(5)) async throws -> [MQTTMessage] {
        try await waitUntil(timeout: timeout) { self.messages.count >= count }
        return messages
    }

    /// Waits for the first message on `topic`.
    func first(on topic: String, timeout: Duration = .seconds(5)) async throws -> MQTTMessage {
        try await waitUntil(timeout: timeout) { self.messages.contains { $0.topic == topic } }
        return messages.first { $0.topic == topic }!
    }
}

/// Records every state a client goes through, from its `states` stream.
final class StateLog: Sendable {
    private let seen = Mutex<[MQTTConnectionState]>([])
    private let finished = Atomic<Bool>(false)

    init(_ client: MQTTClient) {
        let stream = client.states
        Task { [self] in
            for await state in stream { self.seen.withLock { $0.append(state) } }
            self.finished.store(true, ordering: .releasing)
        }
    }

    var states: [MQTTConnectionState] { seen.withLock { $0 } }
    var isFinished: Bool { finished.load(ordering: .acquiring) }
}

/// A unique client ID / topic prefix per test, so tests that share nothing also collide on nothing.
func uniqueName(_ prefix: String) -> String {
    "\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
}

/// A configuration with fast reconnects, suitable for tests against a local broker.
func testConfiguration(
    _ url: String, _ clientID: String = uniqueName("client"), version: MQTTProtocolVersion = .v311
) -> MQTTConfiguration {
    var configuration = MQTTConfiguration(url: url, clientID: clientID)
    configuration.protocolVersion = version
    configuration.reconnectMinDelay = .milliseconds(50)
    configuration.reconnectMaxDelay = .milliseconds(500)
    configuration.connectTimeout = .seconds(5)
    return configuration
}

/// Makes and connects a client.
func connectedClient(
    _ configuration: MQTTConfiguration, streamMessages: Bool = true,
    onMessage: (@Sendable (MQTTMessage) -> Void)? = nil
) async throws -> MQTTClient {
    let client = try MQTTClient(configuration: configuration, streamMessages: streamMessages, onMessage: onMessage)
    try await client.connect()
    return client
}

/// Runs `body` and returns the MQTTError it threw (nil when it did not throw or threw something else).
func mqttError(_ body: () async throws -> Void) async -> MQTTError? {
    do {
        try await body()
        return nil
    } catch {
        return error as? MQTTError
    }
}

/// A thread-safe boolean to share with tasks and handlers.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}

/// Connects a client, pauses the broker, runs `operation` in a task and cancels that task once it runs; returns
/// what it returned (the broker resumed and the client disconnected afterwards).
func cancelledWhileBrokerPaused<T: Sendable>(
    _ broker: MosquittoBroker, _ operation: @escaping @Sendable (MQTTClient) async -> T
) async throws -> T {
    let client = try await connectedClient(testConfiguration(broker.url))
    broker.pause()
    defer { broker.resume() }
    let started = Flag()
    let task = Task {
        started.set()
        return await operation(client)
    }
    try await waitUntil { started.isSet }
    task.cancel()
    let value = await task.value
    broker.resume()
    await client.disconnect()
    return value
}
