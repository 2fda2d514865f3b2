internal import CLazyLibraries
import FoundationEssentials
import Glibc
import Platform
import Synchronization

/// The client's own network thread: it connects, runs `LoopTurn` (poll-based) with a short timeout, and reconnects with
/// `ReconnectBackoff`. Doing this instead of `mosquitto_loop_start` keeps backoff, jitter, connect timeouts and
/// fatal errors (refused credentials) in our hands. Only this thread calls connect, loop, reconnect and destroy
/// while it runs; callers only queue packets (publish/subscribe), which libmosquitto allows from any thread.
struct NetworkThread: Sendable {
    let core: ClientCore
    let handle: MosquittoHandle

    /// How long one `LoopTurn` may wait; bounds how quickly a stop request is noticed.
    private static let loopSliceMilliseconds = 100

    static func start(core: ClientCore, handle: MosquittoHandle) {
        let worker = NetworkThread(core: core, handle: handle)
        startDetachedThread(name: "mqtt-\(core.configuration.clientID)") { worker.run() }
    }

    private var configuration: MQTTConfiguration { core.configuration }

    private func run() {
        defer { thing_agent_socket_buffer_release() }
        switch connectFirst() {
        case .failure(let error):
            // Drop any half-open socket so that an idle client holds nothing; `connect()` may be called again.
            let resetError: MQTTError?
            do {
                try handle.reset(configuration, core.addresses[0], userData: core.userData)
                resetError = nil
            } catch {
                resetError = error
            }
            core.withState { state in
                state.threadRunning = false
                if state.stopRequested || resetError != nil {
                    state.finish(error: resetError)
                    return
                }
                state.transition(to: .idle, error: error)
                for waiter in state.connectWaiters { state.effects.resumptions.append((waiter, .failure(error))) }
                state.connectWaiters.removeAll()
            }
            return
        case .success:
            core.withState { state in
                state.transition(to: .connected)
                for waiter in state.connectWaiters { state.effects.resumptions.append((waiter, .success(()))) }
                state.connectWaiters.removeAll()
            }
        }
        let fatal = serve()
        core.withState { state in
            state.threadRunning = false
            state.finish(error: fatal)
        }
    }

    /// Runs the connection until a stop is requested or a reconnect hits a fatal error (returned).
    private func serve() -> MQTTError? {
        var losses = ConnectionLosses(configuration: configuration)
        while true {
            core.beat()
            if stopRequested {
                disconnectGracefully()
                return nil
            }
            let rc = LoopTurn.run(handle, core, timeoutMilliseconds: Int32(Self.loopSliceMilliseconds))
            guard rc != 0 else { continue }
            // A stop signalled while the turn ran: the connection ending now is the stop, not a loss.
            if stopRequested { return nil }
            let osError = errno
            let (reason, broker) = core.withState { ($0.serverDisconnectReason, $0.broker) }
            let library = MQTTError.library(rc, errno: osError, context: "connection to \(core.addresses[broker].url) lost",
                                            kind: .notConnected)
            let lost = losses.connectionLost(error: library, serverReason: reason, clientID: configuration.clientID)
            core.withState { state in
                state.transition(to: .reconnecting(reason: lost.description), error: lost)
                // libmosquitto may still resend an unacknowledged QoS 1/2 message after the reconnect; the caller
                // is told now rather than left waiting for an outage of unknown length.
                state.failPending(.notConnected("connection lost before the broker acknowledged"))
            }
            switch reconnect(firstRound: losses.backoffAttempt) {
            case .connected(let attempts):
                losses.reconnected(tries: attempts - losses.backoffAttempt, attempt: attempts)
                continue
            case .stop(let fatal): return fatal
            }
        }
    }

    private enum ReconnectOutcome {
        /// With the backoff round the next loss continues from if this connection does not last.
        case connected(attempts: Int)
        case stop(MQTTError?)
    }

    /// The first connect: each broker of the list once, in order, until one accepts. None did: the one error of a
    /// single broker, or one naming every broker's.
    private func connectFirst() -> Result<Void, MQTTError> {
        var errors: [MQTTError] = []
        for broker in core.addresses.indices {
            switch connectOnce(to: broker) {
            case .success: return .success(())
            case .failure(let error) where error.kind == .closed: return .failure(error)
            case .failure(let error): errors.append(error)
            }
        }
        guard errors.count > 1 else { return .failure(errors[0]) }
        // Refused credentials or a TLS set-up that cannot work say more than a broker that is down.
        let telling = errors.first { [.notAuthorized, .tls].contains($0.kind) } ?? errors[0]
        return .failure(MQTTError(kind: telling.kind, code: telling.code,
                                  message: errors.map(\.description).joined(separator: "; "),
                                  context: "no broker of the list accepted the connection"))
    }

    /// Retries with backoff in rounds of the list, starting at round `firstRound` (not 0 after a connection that did
    /// not last): a pause, then every broker once, beginning with the one after the broker lost and ending with it.
    /// With one broker, a round is one attempt. Refused credentials stop the client when every broker of a round
    /// refused them.
    private func reconnect(firstRound: Int) -> ReconnectOutcome {
        let backoff = ReconnectBackoff(minDelay: configuration.reconnectMinDelay, maxDelay: configuration.reconnectMaxDelay)
        var generator = SystemRandomNumberGenerator()
        let count = core.addresses.count
        let lost = core.withState { $0.broker }
        var round = firstRound
        while true {
            if !sleep(backoff.delay(attempt: round, using: &generator)) { return .stop(nil) }
            round += 1
            var refused: MQTTError?
            var onlyRefused = true
            for step in 1...count {
                switch connectOnce(to: (lost + step) % count) {
                case .success:
                    core.withState { $0.transition(to: .connected) }
                    return .connected(attempts: round)
                case .failure(let error) where error.kind == .closed:
                    return .stop(nil)
                case .failure(let error):
                    if error.kind == .notAuthorized { refused = refused ?? error } else { onlyRefused = false }
                    core.withState { $0.transition(to: .reconnecting(reason: error.description), error: error) }
                }
            }
            // Retrying refused credentials only fills the brokers' logs; stop and say why.
            if onlyRefused, let refused { return .stop(refused) }
        }
    }

    /// One connection attempt to `broker` (an index of the list) in the version spoken to it; with `.auto`, a
    /// broker that refuses MQTT 5 is tried again at once in 3.1.1, which it is spoken to from then on.
    private func connectOnce(to broker: Int) -> Result<Void, MQTTError> {
        let version = core.withState { state in
            state.broker = broker
            return state.version
        }
        let outcome = attempt(version: version)
        guard configuration.protocolVersion == .auto, version == .v5, case .failure(let error) = outcome,
              Self.refusesVersion5(error) else { return outcome }
        core.withState { $0.versions[broker] = .v311 }
        return attempt(version: .v311)
    }

    /// How a broker that speaks only 3.1.1 answers a version 5 CONNECT: a CONNACK "unsupported protocol version"
    /// (libmosquitto turns a 3.1.1 CONNACK refusing the version into reason 0x84), or a packet libmosquitto cannot
    /// read (MOSQ_ERR_PROTOCOL).
    private static func refusesVersion5(_ error: MQTTError) -> Bool {
        (error.kind == .connectionRefused && error.code == Self.unsupportedProtocolVersion)
            || (error.kind == .protocolError && error.code == MQTTError.Code.protocolViolation)
    }

    private static let unsupportedProtocolVersion: Int32 = 0x84

    /// One connection attempt to the broker `State.broker` names, bounded by `connectTimeout`: TCP connect, TLS
    /// handshake, CONNACK, and (when the broker has no session for us) re-subscribing every remembered filter and
    /// waiting for the SUBACKs.
    private func attempt(version: MQTTProtocolVersion) -> Result<Void, MQTTError> {
        let address = core.withState { core.addresses[$0.broker] }
        let context = "connecting to \(address.url)"
        let clock = ContinuousClock()
        let deadline = clock.now + configuration.connectTimeout
        core.withState { state in
            state.connack = nil
            state.serverDisconnectReason = nil
            state.attemptLog.removeAll()
        }
        // Answers for the last connection, perhaps half written, must not begin the next one's stream.
        core.answers.withLock { $0.reset() }
        // So must bytes read ahead from the last connection's socket (the next may get the same number).
        thing_agent_socket_buffer_follow(-1)
        do {
            try handle.prepare(version: version, sessionExpiry: configuration.sessionExpiry,
                               keepAlive: configuration.keepAlive)
        } catch {
            return .failure(error)
        }
        Callbacks.listenToLog(handle.pointer, true)
        // Asynchronous connects never block in connect(2), so an unresponsive host cannot outlast the deadline.
        // Every attempt names its broker (libmosquitto's reconnect would dial the last one again).
        let started = libmosquitto.mosquitto_connect_bind_async(
            handle.pointer, address.host, Int32(address.port), Int32(configuration.keepAlive), nil)
        if started != 0 {
            return .failure(diagnosed(Self.connectFailure(started, errno: errno, context: context), address))
        }

        var restoreSent = false
        while true {
            core.beat()
            let now = clock.now
            if now >= deadline {
                return .failure(
                    MQTTError(
                        kind: .timeout, code: MQTTError.Code.timeout,
                        message: "no CONNACK within \(configuration.connectTimeout)", context: context))
            }
            if stopRequested { return .failure(.closed("disconnect() was called while connecting")) }
            let remaining = Int((deadline - now).seconds * 1000) + 1
            let rc = LoopTurn.run(
                handle, core, timeoutMilliseconds: Int32(min(remaining, Self.loopSliceMilliseconds)))
            let osError = errno
            enum Step { case waiting, refused(Int32), done }
            let step = core.withState { state -> Step in
                guard let connack = state.connack else { return .waiting }
                if connack.code != 0 { return .refused(connack.code) }
                if !restoreSent {
                    restoreSent = true
                    if !connack.sessionPresent { Self.sendRestoringSubscriptions(&state) }
                }
                return state.restoring.isEmpty ? .done : .waiting
            }
            switch step {
            case .refused(let code):
                return .failure(.connack(code, version: version, context: context))
            case .done:
                Callbacks.listenToLog(handle.pointer, false)
                return .success(())
            case .waiting:
                if rc != 0 { return .failure(diagnosed(Self.connectFailure(rc, errno: osError, context: context), address)) }
            }
        }
    }

    /// Re-sends every remembered subscription; their SUBACKs are awaited before the client reports `.connected`.
    private static func sendRestoringSubscriptions(_ state: inout State) {
        guard let handle = state.handle else { return }
        for (filter, qos) in state.subscriptions.sorted(by: { $0.key < $1.key }) {
            var mid: Int32 = 0
            if libmosquitto.mosquitto_subscribe(handle.pointer, &mid, filter, Int32(qos.rawValue)) == 0 {
                state.restoring.insert(mid)
            }
        }
    }

    /// The library's error with its cause put in words where libmosquitto has none: what failed in TLS ("A TLS error
    /// occurred" for every cause), or a plain `mqtt://` URL that reached a TLS listener (it closes the connection
    /// without a word, which looks like a broker that is not there).
    private func diagnosed(_ error: MQTTError, _ address: BrokerAddress) -> MQTTError {
        switch error.kind {
        case .timeout, .notAuthorized, .closed, .invalidURL, .clientIDInUse: return error
        default: break
        }
        let probeTimeout = min(configuration.connectTimeout, .seconds(3))
        if configuration.usesTLS(address) {
            let log = core.withState { $0.attemptLog }
            guard let cause = TLSDiagnosis.explain(
                log: log, host: address.host, port: address.port, tls: configuration.tls ?? MQTTTLS(),
                timeout: probeTimeout)
            else { return error }
            return MQTTError(kind: .tls, code: error.code, message: cause, context: error.context)
        }
        guard error.kind == .connectionRefused || error.kind == .protocolError,
              TLSDiagnosis.expectsTLS(host: address.host, port: address.port, timeout: probeTimeout)
        else { return error }
        return MQTTError(
            kind: .tls, code: error.code,
            message: "the broker expects TLS on this port: use an mqtts:// URL (and caFile for its CA)",
            context: error.context)
    }

    /// Any failure before CONNACK that is not TLS, a timeout or a protocol error means no connection could be made.
    private static func connectFailure(_ rc: Int32, errno osError: Int32, context: String) -> MQTTError {
        let kind = MQTTError.kind(forLibraryCode: rc, errno: osError)
        let adjusted: MQTTError.Kind =
            switch kind {
            case .tls, .timeout, .protocolError, .notAuthorized: kind
            default: .connectionRefused
            }
        return .library(rc, errno: osError, context: context, kind: adjusted)
    }

    /// Sends DISCONNECT (so the broker drops the will) after everything queued, and closes the connection cleanly
    /// (`GracefulClose`), for at most a second each.
    private func disconnectGracefully() {
        GracefulClose.disconnect(handle, core)
    }

    /// Sleeps for `duration` in short slices; false when a stop was requested meanwhile.
    private func sleep(_ duration: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + duration
        while clock.now < deadline {
            core.beat()
            if stopRequested { return false }
            let slice = min(deadline - clock.now, .milliseconds(50))
            usleep(UInt32(max(slice.seconds * 1_000_000, 0)))
        }
        return !stopRequested
    }

    private var stopRequested: Bool { core.stopSignalled.load(ordering: .acquiring) }
}
