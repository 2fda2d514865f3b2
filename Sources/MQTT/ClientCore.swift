import Dispatch
import Synchronization

/// The one object libmosquitto's callbacks see (through the `obj` pointer, retained until after `mosquitto_destroy`).
/// Immutable apart from `state`, which sits behind a mutex shared by callers, callbacks and the network thread.
final class ClientCore: Sendable {
    typealias Waiter = CheckedContinuation<Result<Void, MQTTError>, Never>

    let configuration: MQTTConfiguration
    /// `configuration.brokers`, parsed; `State.broker` says which one is in use.
    let addresses: [BrokerAddress]
    let onMessage: (@Sendable (MQTTMessage) -> Void)?
    /// After a network turn in which packets were handled (`MQTTClient.init`'s `onReceiveTurnEnd`).
    let onReceiveTurnEnd: (@Sendable () -> Void)?
    let onStateChange: (@Sendable (MQTTConnectionState, MQTTError?) -> Void)?
    let messages: AsyncStream<MQTTMessage>
    private let messageSink: AsyncStream<MQTTMessage>.Continuation?
    let state: Mutex<State>
    /// When the network thread last went round its loop (uptime nanoseconds): a watchdog's sign of life.
    let heartbeat = Atomic<UInt64>(0)
    /// `State.stopRequested`, readable without the lock: the network thread asks once per packet, and taking the
    /// lock for it contended with every publish from other threads (the daemon's event feed).
    let stopSignalled = Atomic<Bool>(false)
    /// Signalled by every thread but the network thread after it queued a packet, so the packet goes out at once.
    let wake = WakeSignal()
    /// Messages received and publishes completed, counted by the callbacks: `LoopTurn` reads packets while a call
    /// finds one (errno cannot tell it: whatever the message handler calls may leave EAGAIN in it).
    let packetsHandled = Atomic<Int>(0)
    /// Answers the message handler published on a plain TCP connection, waiting for the network thread to write them
    /// (`HandlerAnswers`). Only the network thread uses it, so its lock is never contended.
    let answers = Mutex(HandlerAnswers())

    func beat() {
        heartbeat.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
    }

    init(
        configuration: MQTTConfiguration, addresses: [BrokerAddress], streamMessages: Bool,
        onMessage: (@Sendable (MQTTMessage) -> Void)?,
        onReceiveTurnEnd: (@Sendable () -> Void)? = nil,
        onStateChange: (@Sendable (MQTTConnectionState, MQTTError?) -> Void)?
    ) {
        self.configuration = configuration
        self.addresses = addresses
        self.onMessage = onMessage
        self.onReceiveTurnEnd = onReceiveTurnEnd
        self.onStateChange = onStateChange
        let (stream, sink) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        messages = stream
        if streamMessages {
            messageSink = sink
        } else {
            messageSink = nil
            sink.finish()
        }
        let first: MQTTProtocolVersion = configuration.protocolVersion == .v311 ? .v311 : .v5
        state = Mutex(State(versions: addresses.map { _ in first }))
    }

    static func from(_ obj: UnsafeMutableRawPointer?) -> ClientCore? {
        obj.map { Unmanaged<ClientCore>.fromOpaque($0).takeUnretainedValue() }
    }

    var userData: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Runs `body` under the lock, then (outside it) reports state changes to `onStateChange`, finishes streams of a
    /// stopped client, and resumes the waiters `body` completed. Nothing user-supplied ever runs under the lock.
    @discardableResult
    func withState<R: Sendable>(_ body: (inout State) -> R) -> R {
        let (result, effects) = state.withLock { state in
            let result = body(&state)
            let effects = state.effects
            state.effects = Effects()
            return (result, effects)
        }
        for (newState, error) in effects.stateChanges {
            onStateChange?(newState, error)
        }
        for (waiter, outcome) in effects.resumptions {
            waiter.resume(returning: outcome)
        }
        for (waiter, outcomes) in effects.batchResumptions {
            waiter.resume(returning: outcomes)
        }
        if effects.finishStreams {
            messageSink?.finish()
            for observer in effects.observersToFinish { observer.finish() }
        }
        if let handle = effects.handleToDestroy {
            handle.destroy()
            Unmanaged<ClientCore>.fromOpaque(userData).release()
        }
        for waiter in effects.exitWaiters { waiter.resume() }
        return result
    }

    // MARK: Callbacks (network thread)

    func didReceiveConnack(code: Int32, sessionPresent: Bool, maximumPacketSize: UInt32?) {
        withState {
            $0.connack = Connack(code: code, sessionPresent: sessionPresent, maximumPacketSize: maximumPacketSize)
        }
    }

    func didCompletePublish(mid: Int32, reasonCode: Int32) {
        packetsHandled.add(1, ordering: .relaxed)
        withState { state in
            guard let operation = state.pending.removeValue(forKey: mid) else { return }
            let topic: String
            switch operation {
            case .publish(_, let published), .batchPublish(_, _, let published): topic = published
            case .subscribe, .unsubscribe: return
            }
            // MQTT 5 PUBACK/PUBREC reason codes below 0x80 are successes (0x10: no matching subscribers).
            let outcome: Result<Void, MQTTError> =
                reasonCode >= 0x80 ? .failure(.reason(reasonCode, context: "publish to \"\(topic)\"")) : .success(())
            state.settle(operation, outcome)
        }
    }

    func didSubscribe(mid: Int32, grantedCodes: [Int32]) {
        withState { state in
            if state.restoring.remove(mid) != nil { return }
            guard case .subscribe(let waiter, let filters)? = state.pending.removeValue(forKey: mid) else { return }
            var refused: [(String, Int32)] = []
            for (index, (filter, qos)) in filters.enumerated() {
                let code = index < grantedCodes.count ? grantedCodes[index] : 0x80
                if code >= 0x80 {
                    refused.append((filter, code))
                } else {
                    state.subscriptions[filter] = qos
                }
            }
            if let firstRefusal = refused.first {
                let names = refused.map { "\"\($0.0)\"" }.joined(separator: ", ")
                let error = MQTTError.reason(firstRefusal.1, context: "subscribe to \(names)")
                state.effects.resumptions.append((waiter, .failure(error)))
            } else {
                state.effects.resumptions.append((waiter, .success(())))
            }
        }
    }

    func didUnsubscribe(mid: Int32) {
        withState { state in
            guard case .unsubscribe(let waiter, _)? = state.pending.removeValue(forKey: mid) else { return }
            state.effects.resumptions.append((waiter, .success(())))
        }
    }

    /// A DISCONNECT from the broker (MQTT 5) carries a reason code of 0x80 and up; libmosquitto's own codes for
    /// socket errors and our own DISCONNECT are below that.
    func didDisconnect(reason: Int32) {
        guard reason >= 0x80 else { return }
        withState { $0.serverDisconnectReason = reason }
    }

    /// Keeps libmosquitto's error lines of the current connection attempt: the OpenSSL errors behind a TLS failure
    /// ("certificate verify failed", "tlsv13 alert certificate required") are only ever said there.
    func didLog(_ line: String) {
        withState { state in
            if state.attemptLog.count >= State.attemptLogLimit { state.attemptLog.removeFirst() }
            state.attemptLog.append(line)
        }
    }

    /// Runs the synchronous handler first (libmosquitto acknowledges a QoS 1/2 message only after this returns),
    /// then queues the message for the ordered stream.
    func didReceive(_ message: MQTTMessage) {
        packetsHandled.add(1, ordering: .relaxed)
        onMessage?(message)
        messageSink?.yield(message)
    }
}

/// A CONNACK as seen by the connect callback.
struct Connack: Sendable {
    var code: Int32
    var sessionPresent: Bool
    /// MQTT 5: the largest packet the broker takes, when it says.
    var maximumPacketSize: UInt32?
}

/// An operation waiting for the broker's acknowledgement, keyed by message id.
enum PendingOperation {
    case publish(ClientCore.Waiter, topic: String)
    case subscribe(ClientCore.Waiter, filters: [(String, QoS)])
    case unsubscribe(ClientCore.Waiter, filter: String)
    /// One message of `MQTTClient.publish(inOrder:)`: its outcome goes to slot `index` of the batch.
    case batchPublish(PublishBatch, index: Int, topic: String)
}

/// Work collected under the lock and carried out after it is released.
struct Effects {
    var stateChanges: [(MQTTConnectionState, MQTTError?)] = []
    var resumptions: [(ClientCore.Waiter, Result<Void, MQTTError>)] = []
    var batchResumptions: [(PublishBatch.Waiter, [Result<Void, MQTTError>])] = []
    var exitWaiters: [CheckedContinuation<Void, Never>] = []
    var observersToFinish: [AsyncStream<MQTTConnectionState>.Continuation] = []
    var finishStreams = false
    var handleToDestroy: MosquittoHandle?
}

/// Everything mutable about a client.
struct State {
    var connection: MQTTConnectionState = .idle
    /// The broker of the current connection, or the one being tried (an index of `ClientCore.addresses`); changed
    /// by the network thread alone.
    var broker = 0
    /// The protocol version spoken to each broker: `.v311` or `.v5` (with `.auto`, `.v5` until a broker refuses it).
    var versions: [MQTTProtocolVersion]
    /// The protocol version spoken to the broker in use.
    var version: MQTTProtocolVersion { versions[broker] }
    /// nil once destroyed.
    var handle: MosquittoHandle?
    var threadRunning = false
    /// Never cleared once set; set only through `requestStop(_:)`, which keeps `ClientCore.stopSignalled` in step.
    private(set) var stopRequested = false

    mutating func requestStop(_ core: ClientCore) {
        stopRequested = true
        core.stopSignalled.store(true, ordering: .releasing)
    }
    var connectWaiters: [ClientCore.Waiter] = []
    var exitWaiters: [CheckedContinuation<Void, Never>] = []
    var pending: [Int32: PendingOperation] = [:]
    /// Subscriptions the broker acknowledged, restored after a reconnect that lost the session.
    var subscriptions: [String: QoS] = [:]
    /// Message ids of SUBSCRIBEs sent to restore `subscriptions`.
    var restoring: Set<Int32> = []
    /// The CONNACK of the current connection attempt.
    var connack: Connack?
    var observers: [Int: AsyncStream<MQTTConnectionState>.Continuation] = [:]
    var nextObserverID = 0
    var lastError: MQTTError?
    var effects = Effects()
    /// The reason code of the broker's DISCONNECT that ended the current connection, if it sent one.
    var serverDisconnectReason: Int32?
    /// libmosquitto's error lines since the current connection attempt began (at most `attemptLogLimit`).
    var attemptLog: [String] = []
    static let attemptLogLimit = 16

    /// Publishes a new state to observers (under the lock, so they see changes in order) and queues the callback.
    mutating func transition(to new: MQTTConnectionState, error: MQTTError? = nil) {
        if let error { lastError = error }
        guard new != connection else { return }
        connection = new
        for observer in observers.values { observer.yield(new) }
        effects.stateChanges.append((new, error))
    }

    /// Ends one acknowledged operation: its caller resumes after the lock is released (a batch's caller once its
    /// last message is settled).
    mutating func settle(_ operation: PendingOperation, _ outcome: Result<Void, MQTTError>) {
        switch operation {
        case .publish(let waiter, _), .subscribe(let waiter, _), .unsubscribe(let waiter, _):
            effects.resumptions.append((waiter, outcome))
        case .batchPublish(let batch, let index, _):
            if let done = batch.settle(index, outcome) { effects.batchResumptions.append(done) }
        }
    }

    /// Fails every operation waiting for an acknowledgement.
    mutating func failPending(_ error: MQTTError) {
        for operation in pending.values {
            settle(operation, .failure(error))
        }
        pending.removeAll()
        restoring.removeAll()
    }

    /// Moves to the final state: fails all waiters, finishes streams, and hands the handle over for destruction when
    /// the network thread no longer uses it.
    mutating func finish(error: MQTTError? = nil) {
        transition(to: .stopped, error: error)
        failPending(.closed("the client was shut down before the broker acknowledged"))
        for waiter in connectWaiters {
            effects.resumptions.append((waiter, .failure(error ?? .closed("disconnect() was called while connecting"))))
        }
        connectWaiters.removeAll()
        effects.observersToFinish += observers.values
        observers.removeAll()
        effects.finishStreams = true
        if !threadRunning {
            effects.handleToDestroy = handle
            handle = nil
            effects.exitWaiters += exitWaiters
            exitWaiters.removeAll()
        }
    }
}
