import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// How a pairing ended for the one who made it (`PairingSession`).
public enum PairingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Its time ran out before a device used it.
    case expired
    case revoked
    /// The wait ended first (`PairingSession.result(timeout:)`); the pairing itself may still be used.
    case timeout
    /// The agent stopped.
    case cancelled

    public var description: String {
        switch self {
        case .expired: "the pairing expired before a device used it"
        case .revoked: "the pairing was revoked"
        case .timeout: "no device activated within the wait"
        case .cancelled: "the agent stopped"
        }
    }
}

/// Why a pairing could not be made or revoked.
public struct ProvisioningError: Error, Sendable, Equatable, CustomStringConvertible {
    /// As the API answers it (HTTP-like codes).
    public enum Kind: Int, Sendable {
        case invalid = 400
        case notFound = 404
        /// The pairing already ended.
        case ended = 409
        /// Provisioning is off, or the broker's plugin cannot be used.
        case unavailable = 503
    }

    public let kind: Kind
    public let message: String
    public var description: String { message }

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
}

/// An activation refused: the code of docs/protocol.md ("Provisioning") and why, said to the device and logged
/// (never with the token).
struct ActivationRefusal: Error {
    let code: Int
    let reason: String

    static func badData(_ reason: String) -> ActivationRefusal { ActivationRefusal(code: 1003, reason: reason) }
    static let expired = ActivationRefusal(code: 1010, reason: "token expired")
    static let used = ActivationRefusal(code: 1011, reason: "token already used")
    static let unknown = ActivationRefusal(code: 1012, reason: "unknown token")
    static let bound = ActivationRefusal(code: 1013, reason: "device already bound")
}

/// Activations refused, by code, and devices activated (the `/metrics` endpoint and `Agent.provisioningCounts`).
public final class ProvisioningCounters: Sendable {
    private let counts = Mutex<[Int: Int]>([:])
    let activations = Atomic<Int>(0)
    let drops = Atomic<Int>(0)

    func refused(_ code: Int) { counts.withLock { $0[code, default: 0] += 1 } }

    /// Refusals by code.
    public var refusals: [Int: Int] { counts.withLock { $0 } }
    public var activated: Int { activations.load(ordering: .relaxed) }
    /// Activation requests dropped unanswered because the queue of requests waiting to be answered was full.
    public var dropped: Int { drops.load(ordering: .relaxed) }
}

/// The daemon's provisioning: pairings, activations, and the broker access that follows them.
final class Provisioning: Sendable {
    let store: PairingStore
    let access: AccessManager
    let topics: Topics
    let logger: AgentLogger
    let counters = ProvisioningCounters()
    let stream: AsyncStream<MQTTMessage>
    private let continuation: AsyncStream<MQTTMessage>.Continuation
    private let logLimiter = LogRateLimiter()
    /// Who waits for a pairing's end, by its user name.
    private let waiters = Mutex<[String: [@Sendable (Result<DeviceInfo, PairingError>) -> Void]]>([:])
    /// Devices activated whose pairing's bootstrap credentials still live, and whether each has been heard from
    /// since with its own credentials (or, a sub-device, through its gateway): the proof that its answer arrived.
    private let firstWord = Mutex<[String: (pairing: String, heard: Bool)]>([:])
    /// Activation requests waiting to be answered; a flood beyond it is counted and dropped, never queued without end.
    static let queueLimit = 1024

    init(store: PairingStore, access: AccessManager, topics: Topics, logger: AgentLogger) {
        self.store = store
        self.access = access
        self.topics = topics
        self.logger = logger
        (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(Self.queueLimit))
        // A restart forgets what was heard: those devices wait for their next word (or the pairing's expiry).
        let unheard = (try? store.uncleaned().filter { $0.state == .used }) ?? []
        firstWord.withLock { waiting in
            for pairing in unheard { if let device = pairing.deviceId { waiting[device] = (pairing.username, false) } }
        }
    }

    /// Called on the receive path for topics outside the device tree: takes activation requests. An empty one
    /// is the clearing of a retained request (the agent's own, `Agent.activate`): taken, never answered.
    func accept(_ message: MQTTMessage) -> Bool {
        guard topics.activationUser(message.topic) != nil else { return false }
        if message.payload.isEmpty { return true }
        if case .dropped = continuation.yield(message) {
            counters.drops.add(1, ordering: .relaxed)
            if logLimiter.shouldLog("activation-queue-full", now: Timestamp.now()) {
                logger.warning("activation request dropped: \(Self.queueLimit) requests are waiting to be answered",
                               metadata: ["topic": message.topic])
            }
        }
        return true
    }

    func finish() {
        continuation.finish()
        access.finish()
        let all = waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return waiters.values.flatMap { $0 }
        }
        for waiter in all { waiter(.failure(.cancelled)) }
    }

    func wait(for username: String, _ body: @escaping @Sendable (Result<DeviceInfo, PairingError>) -> Void) {
        waiters.withLock { $0[username, default: []].append(body) }
    }

    /// How the pairing ended, from the file; nil while it is pending (or unknown).
    func outcome(of username: String) -> Result<DeviceInfo, PairingError>? {
        guard let pairing = try? store.pairing(username: username) else { return nil }
        switch pairing.state(at: Timestamp.now()) {
        case .pending, .activating: return nil
        case .expired: return .failure(.expired)
        case .revoked: return .failure(.revoked)
        case .used:
            guard let id = pairing.deviceId else { return nil }
            return .success(access.cache.device(id)?.info ?? DeviceInfo(devId: id))
        }
    }

    func ended(_ username: String, _ result: Result<DeviceInfo, PairingError>) {
        for waiter in waiters.withLock({ $0.removeValue(forKey: username) }) ?? [] { waiter(result) }
    }

    func refused(_ refusal: ActivationRefusal, pairing: String, now: Millis) {
        counters.refused(refusal.code)
        if logLimiter.shouldLog("\(pairing)-\(refusal.code)", now: now) {
            logger.notice("refused an activation", metadata: [
                "pairing": pairing, "code": "\(refusal.code)", "reason": refusal.reason])
        }
    }

    /// A device just activated: its pairing's bootstrap credentials live until it is heard from.
    func awaitFirstWord(_ device: String, pairing: String) {
        firstWord.withLock { $0[device] = (pairing, false) }
    }

    /// The receive path applied a change to `device` (`AccessWatch`): if it was waiting for its first word, its
    /// answer arrived.
    func heard(_ device: String) {
        firstWord.withLock { if $0[device]?.heard == false { $0[device]?.heard = true } }
    }

    /// The answer's `data` a used pairing gave the device that asks again with its token (its answer was lost, or
    /// this request is a duplicate); nil when this request is not such a repeat. The same credentials, not new
    /// ones: new ones would cut off a device that did get the first answer and already uses it.
    func answerAgain(_ request: JSONObject?, pairing user: String, now: Millis) throws -> JSONObject? {
        guard let data = request?["data"]?.objectValue, let token = data["token"]?.stringValue,
              let device = data["devId"]?.stringValue, access.cache.device(device) != nil else { return nil }
        return try store.answer(tokenHash: Secrets.hash(token), username: user, device: device, now: now)
    }

    /// Whether a used pairing's bootstrap credentials may go: its device was heard from (its answer arrived), is
    /// gone, or the pairing's time is up. Until then a device whose answer was lost can ask again.
    private func isDone(_ pairing: Pairing, now: Millis) -> Bool {
        guard let device = pairing.deviceId, access.cache.device(device) != nil, pairing.expiresAt > now else {
            return true
        }
        return firstWord.withLock { $0[device].map { $0.pairing != pairing.username || $0.heard } ?? true }
    }

    /// Ends expired pairings and deletes the bootstrap credentials of ended ones (a used one once `isDone`).
    func cleanUp(now: Millis) async {
        do {
            for pairing in try store.expireDue(now: now) { ended(pairing.username, .failure(.expired)) }
            for pairing in try store.uncleaned() where pairing.state != .used || isDone(pairing, now: now) {
                try await access.deleteBootstrap(pairing.username)
                if let device = pairing.deviceId {
                    firstWord.withLock { if $0[device]?.pairing == pairing.username { $0.removeValue(forKey: device) } }
                }
                logger.info("deleted a pairing's bootstrap broker credentials", metadata: [
                    "pairing": pairing.username, "state": pairing.state.rawValue])
            }
        } catch {
            if logLimiter.shouldLog("cleanup", now: now) {
                logger.warning("could not clean up ended pairings", metadata: ["error": "\(error)"])
            }
        }
    }
}
