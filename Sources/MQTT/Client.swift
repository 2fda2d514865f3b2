internal import CLazyLibraries
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// An MQTT client over libmosquitto: one connection, automatic reconnects, incoming messages as one ordered stream.
public final class MQTTClient: Sendable {
    let core: ClientCore

    /// `onMessage` runs synchronously on the network thread for every incoming message, BEFORE libmosquitto sends the
    /// PUBACK/PUBREC (libmosquitto queues it just before calling on_message and, in the thread-safe mode this client
    /// sets, writes it only once on_message returned; `dropConnectionUncleanly()` from here keeps it from going out).
    /// Keep it short. Messages are also yielded,
    /// in order, to `messages` when `streamMessages` is true.
    ///
    /// `onReceiveTurnEnd` runs on the network thread after each turn of its loop that handled packets: a turn
    /// reads every packet already waiting (a backlog's in-flight window), so a receiver can batch what the turn's
    /// `onMessage` calls produced and hand it on once.
    ///
    /// `onStateChange` is called on the thread that changed the state, with the error that caused it if any
    /// (why a connection was lost, why a reconnect failed, the refused credentials that stopped the client).
    ///
    /// Throws `.invalidURL` for a bad URL, `.tls` for unreadable TLS files, `.other` for other unusable settings.
    public init(
        configuration: MQTTConfiguration, streamMessages: Bool = true,
        onMessage: (@Sendable (MQTTMessage) -> Void)? = nil,
        onReceiveTurnEnd: (@Sendable () -> Void)? = nil,
        onStateChange: (@Sendable (MQTTConnectionState, MQTTError?) -> Void)? = nil
    ) throws(MQTTError) {
        let addresses = try BrokerAddress.list(configuration.brokers)
        let core = ClientCore(
            configuration: configuration, addresses: addresses, streamMessages: streamMessages,
            onMessage: onMessage, onReceiveTurnEnd: onReceiveTurnEnd, onStateChange: onStateChange)
        // The handle's `obj` holds one retain on the core, given back after mosquitto_destroy.
        let retained = Unmanaged.passRetained(core).toOpaque()
        do {
            let handle = try MosquittoHandle.make(configuration, addresses[0], userData: retained)
            core.state.withLock { $0.handle = handle }
        } catch {
            Unmanaged<ClientCore>.fromOpaque(retained).release()
            throw error
        }
        self.core = core
    }

    deinit {
        // Without a network thread, destroy here; otherwise the thread sends DISCONNECT and destroys on its way out.
        core.withState { state in
            guard state.connection != .stopped || state.handle != nil else { return }
            state.requestStop(core)
            if !state.threadRunning { state.finish() }
        }
    }

    public var configuration: MQTTConfiguration { core.configuration }

    /// Why libmosquitto reads this process's plain-TCP sockets unbuffered (a `read(2)` for each byte of a packet's
    /// header); nil when its reads go through the network thread's buffer, as on Linux x86_64 and arm64. Known once
    /// a client was made.
    public static var unbufferedReads: String? { MosquittoLibrary.unbufferedReads }

    /// Incoming messages in arrival order. Single consumer: every call returns the same stream.
    /// Finishes when the client stops. Empty when the client was made with `streamMessages: false`.
    public var messages: AsyncStream<MQTTMessage> { core.messages }

    public var state: MQTTConnectionState { core.state.withLock { $0.connection } }

    /// The broker of the current connection (while reconnecting: the one being tried or last tried), as it is
    /// written in `configuration.brokers`, and the protocol version spoken to it (`.v311` or `.v5`).
    public var broker: (url: String, version: MQTTProtocolVersion) {
        core.state.withLock { (core.addresses[$0.broker].url, $0.version) }
    }

    /// How long ago the network thread (which also runs `onMessage`) last went round its loop; nil when no thread
    /// runs. It goes round at least every 100 ms while it connects, serves or waits to reconnect, so a large value
    /// means it is stuck (in `onMessage`, say).
    public var networkThreadIdle: Duration? {
        guard core.state.withLock({ $0.threadRunning }) else { return nil }
        let last = core.heartbeat.load(ordering: .relaxed)
        let now = DispatchTime.now().uptimeNanoseconds
        return .nanoseconds(Int64(clamping: now > last ? now - last : 0))
    }

    /// The error behind the latest state change (a lost connection, a failed attempt), if any.
    public var lastError: MQTTError? { core.state.withLock { $0.lastError } }

    /// A new observer stream on each call: it starts with the current state, then every change, and finishes after
    /// `.stopped`.
    public var states: AsyncStream<MQTTConnectionState> {
        let (stream, observer) = AsyncStream.makeStream(of: MQTTConnectionState.self, bufferingPolicy: .unbounded)
        let id: Int? = core.state.withLock { state in
            observer.yield(state.connection)
            guard state.connection != .stopped else { return nil }
            let id = state.nextObserverID
            state.nextObserverID += 1
            state.observers[id] = observer
            return id
        }
        if let id {
            observer.onTermination = { [weak core] _ in
                _ = core?.state.withLock { $0.observers.removeValue(forKey: id) }
            }
        } else {
            observer.finish()
        }
        return stream
    }

    /// Connects and waits for CONNACK. Fails (throws) with a clear error — no retry loop — when the first attempt
    /// cannot work: refused credentials (`.notAuthorized`), TLS that cannot be set up or verified (`.tls`), closed
    /// port (`.connectionRefused`), no CONNACK within `connectTimeout` (`.timeout`); the client is then `.idle` again.
    /// After a successful connect, connection losses reconnect automatically with exponential backoff and jitter
    /// between the configured delays, restoring every subscription (also when the broker lost the session).
    /// Credentials refused on a reconnect stop the client (`.stopped`, error passed to `onStateChange`).
    /// Returns at once when already connected or reconnecting; throws `.closed` after `disconnect()`.
    public func connect() async throws(MQTTError) {
        let outcome = await withCheckedContinuation { (waiter: ClientCore.Waiter) in
            let start: MosquittoHandle? = core.withState { state in
                switch state.connection {
                case .connected, .reconnecting:
                    state.effects.resumptions.append((waiter, .success(())))
                    return nil
                case .stopped:
                    state.effects.resumptions.append((waiter, .failure(.closed("connect() after disconnect()"))))
                    return nil
                case .connecting:
                    state.connectWaiters.append(waiter)
                    return nil
                case .idle:
                    guard let handle = state.handle else {
                        state.effects.resumptions.append((waiter, .failure(.closed("connect() after disconnect()"))))
                        return nil
                    }
                    state.connectWaiters.append(waiter)
                    state.threadRunning = true
                    state.transition(to: .connecting)
                    return handle
                }
            }
            if let start { NetworkThread.start(core: core, handle: start) }
        }
        try outcome.get()
    }

    /// Subscribes and waits for the SUBACK. An acknowledged filter is remembered and restored after reconnects.
    public func subscribe(_ topicFilter: String, qos: QoS) async throws(MQTTError) {
        try await subscribe([(topicFilter, qos)])
    }

    /// Subscribes to several filters (one SUBSCRIBE per QoS level) and waits for every SUBACK. Filters the broker
    /// refuses are not remembered; the error names them.
    public func subscribe(_ filters: [(String, QoS)]) async throws(MQTTError) {
        for (filter, _) in filters where libmosquitto.mosquitto_sub_topic_check(filter) != 0 {
            throw MQTTError(
                kind: .protocolError, code: MQTTError.Code.invalid, message: "invalid topic filter",
                context: "subscribe to \"\(filter)\"")
        }
        for qos in QoS.allCases {
            let group = filters.filter { $0.1 == qos }
            guard !group.isEmpty else { continue }
            try await awaitAcknowledgement(context: "subscribe to \"\(group[0].0)\"") { handle, mid, _ in
                var names = group.map { strdup($0.0) }
                defer { names.forEach { free($0) } }
                let rc = names.withUnsafeMutableBufferPointer { buffer in
                    libmosquitto.mosquitto_subscribe_multiple(
                        handle.pointer, &mid, Int32(buffer.count), buffer.baseAddress, Int32(qos.rawValue), 0, nil)
                }
                return (rc, { .subscribe($0, filters: group) })
            }
        }
    }

    /// Unsubscribes, waits for the UNSUBACK, and forgets the filter (it is no longer restored).
    public func unsubscribe(_ topicFilter: String) async throws(MQTTError) {
        try await awaitAcknowledgement(context: "unsubscribe from \"\(topicFilter)\"") { handle, mid, _ in
            let rc = libmosquitto.mosquitto_unsubscribe(handle.pointer, &mid, topicFilter)
            return (rc, { .unsubscribe($0, filter: topicFilter) })
        } beforeSending: { state in
            state.subscriptions.removeValue(forKey: topicFilter)
        }
    }

    /// QoS 0: returns once handed to the library. QoS 1/2: returns once the broker acknowledged (PUBACK / PUBCOMP).
    /// Throws `.notConnected` if not connected (also when the connection drops before the acknowledgement; the
    /// library may still deliver the message after the reconnect), `.closed` after `disconnect()`.
    /// MQTT 5: `responseTopic` / `correlationData` are sent as properties (ignored under 3.1.1).
    public func publish(
        _ topic: String, payload: [UInt8], qos: QoS = .atLeastOnce, retain: Bool = false,
        responseTopic: String? = nil, correlationData: [UInt8]? = nil
    ) async throws(MQTTError) {
        let context = "publish to \"\(topic)\""
        var properties = PropertyList()
        if core.configuration.protocolVersion != .v311 {
            var rc: Int32 = 0
            if let responseTopic { rc = properties.addString(MQTT_PROP_RESPONSE_TOPIC, responseTopic) }
            if rc == 0, let correlationData { rc = properties.addBinary(MQTT_PROP_CORRELATION_DATA, correlationData) }
            if rc != 0 { throw MQTTError.library(rc, context: context) }
        }
        let propertyList = SendableProperties(pointer: properties.pointer)
        // Under the client's lock: the properties go only to a broker spoken to in MQTT 5 (libmosquitto refuses
        // them under 3.1.1), which, with `.auto` and a list, is known only at the moment of sending.
        let send = { (handle: MosquittoHandle, mid: inout Int32, version: MQTTProtocolVersion) -> Int32 in
            payload.withUnsafeBytes { bytes in
                libmosquitto.mosquitto_publish_v5(
                    handle.pointer, &mid, topic, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain,
                    version == .v5 ? propertyList.pointer : nil)
            }
        }
        if qos == .atMostOnce {
            let outcome: Result<Void, MQTTError> = core.withState { state in
                guard let handle = connectedHandle(state, context: context) else {
                    return .failure(notConnectedError(state, context: context))
                }
                var mid: Int32 = 0
                let rc = send(handle, &mid, state.version)
                core.wake.signal()
                return rc == 0 ? .success(()) : .failure(.library(rc, context: context))
            }
            try outcome.get()
            return
        }
        try await awaitAcknowledgement(context: context) { handle, mid, version in
            (send(handle, &mid, version), { .publish($0, topic: topic) })
        }
        _ = properties  // a last use: the property list must outlive the locked send above
    }

    /// Publishes UTF-8 text.
    public func publish(_ topic: String, _ text: String, qos: QoS = .atLeastOnce, retain: Bool = false)
        async throws(MQTTError)
    {
        try await publish(topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// Clean shutdown: sends DISCONNECT (so no will), stops the network thread, fails waiting operations with
    /// `.closed`, finishes the streams, and frees the connection. Idempotent; concurrent calls all wait for the end.
    public func disconnect() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            core.withState { state in
                if state.connection == .stopped && !state.threadRunning {
                    state.effects.exitWaiters.append(waiter)
                    return
                }
                state.requestStop(core)
                state.exitWaiters.append(waiter)
                if !state.threadRunning { state.finish() }
                // Wake the network thread's poll, so that it stops at once instead of at the end of its loop slice.
                // The thread queues the DISCONNECT itself (`disconnectGracefully`), after it saw the stop: a loop
                // turn corks its writes only while no stop is signalled, because the library closes the socket
                // right after writing a DISCONNECT, and a socket closed with unread data left is reset, its
                // corked acknowledgements never sent.
                if state.threadRunning { core.wake.signal() }
            }
        }
    }

    /// Cuts the TCP connection without DISCONNECT, as a crash or a network failure would: the broker publishes the
    /// will and the client reconnects. Nothing more goes out on that connection, so called from `onMessage` it also
    /// refuses the message being handled: its PUBACK, queued but not yet written, never reaches the broker, which
    /// sends the message again after the reconnect (persistent session). Used by tests and by a receive path that
    /// cannot keep a message (ThingAgent's, on a full disk).
    package func dropConnectionUncleanly() {
        core.withState { state in
            guard let handle = state.handle else { return }
            let socket = libmosquitto.mosquitto_socket(handle.pointer)
            if socket >= 0 { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    // MARK: Acknowledged operations

    /// Sends a packet and waits for its acknowledgement. The lock is held from the send until the operation is
    /// registered under its message id, because the acknowledgement callback can run on the network thread before
    /// the send call has even returned; the callback then waits for the lock and finds the registration.
    private func awaitAcknowledgement(
        context: String,
        send: (MosquittoHandle, inout Int32, MQTTProtocolVersion) -> (Int32, (ClientCore.Waiter) -> PendingOperation),
        beforeSending: (inout State) -> Void = { _ in }
    ) async throws(MQTTError) {
        // A cancelled caller stops waiting, but its packet is sent all the same (a stopping agent's last words are
        // sent from a cancelled task): a broker that stopped answering must not hold up a task that is being stopped
        // until the keepalive notices. `registration` is only touched under the client's lock, so the cancellation
        // either finds the operation or is seen before it is registered.
        let registration = RegistrationBox()
        let core = core
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: ClientCore.Waiter) in
                core.withState { state in
                    guard let handle = connectedHandle(state, context: context) else {
                        state.effects.resumptions.append((waiter, .failure(notConnectedError(state, context: context))))
                        return
                    }
                    beforeSending(&state)
                    var mid: Int32 = 0
                    let (rc, operation) = send(handle, &mid, state.version)
                    core.wake.signal()
                    if rc != 0 {
                        state.effects.resumptions.append((waiter, .failure(.library(rc, context: context))))
                        return
                    }
                    if registration.cancelled {
                        state.effects.resumptions.append((waiter, .failure(Self.cancelledError(context))))
                        return
                    }
                    state.pending[mid] = operation(waiter)
                    registration.mid = mid
                }
            }
        } onCancel: {
            core.withState { state in
                registration.cancelled = true
                guard let mid = registration.mid, let operation = state.pending.removeValue(forKey: mid) else { return }
                state.settle(operation, .failure(Self.cancelledError(context)))
            }
        }
        try outcome.get()
    }

    static func cancelledError(_ context: String) -> MQTTError {
        MQTTError(kind: .notConnected, code: MQTTError.Code.noConnection,
                  message: "the caller stopped waiting for the acknowledgement (cancelled)", context: context)
    }

    func connectedHandle(_ state: State, context: String) -> MosquittoHandle? {
        state.connection == .connected ? state.handle : nil
    }

    func notConnectedError(_ state: State, context: String) -> MQTTError {
        state.connection == .stopped ? .closed(context) : .notConnected(context)
    }
}

/// Where an acknowledged operation's registration and its cancellation meet; read and written only under the client's
/// lock.
private final class RegistrationBox: @unchecked Sendable {
    var mid: Int32?
    var cancelled = false
}

/// A property list pointer read inside the locked publish call; the list itself lives on the caller's stack.
private struct SendableProperties: @unchecked Sendable {
    let pointer: OpaquePointer?
}
