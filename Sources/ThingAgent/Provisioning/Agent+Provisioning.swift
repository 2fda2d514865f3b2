import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// A pairing just made, and how it ends: with the activated device, or an error (expired, revoked), by callback
/// (`onResult`), by `result(timeout:)`, or as a one-element `AsyncSequence` (`results`).
public struct PairingSession: Sendable {
    /// The token, the bootstrap credentials and the pairing as kept.
    public let made: NewPairing
    let provisioning: Provisioning

    /// Waits for the pairing to end; `timeout` (default: until its expiry) ends the wait with `.timeout`.
    public func result(timeout: Duration? = nil) async -> Result<DeviceInfo, PairingError> {
        let ttl = Duration.milliseconds(max(0, made.pairing.expiresAt - Timestamp.now()) + 5000)
        let box = ResultBox()
        return await withTimeout(timeout ?? ttl) {
            await withCheckedContinuation { continuation in
                box.set(continuation)
                provisioning.wait(for: made.pairing.username) { box.resume($0) }
                // It may have ended before the wait began.
                if let ended = provisioning.outcome(of: made.pairing.username) { box.resume(ended) }
            }
        } expire: {
            box.resume(.failure(.timeout))
        }
    }

    /// Calls `body` once, when the pairing ends (or `timeout` passes).
    public func onResult(timeout: Duration? = nil,
                         _ body: @escaping @Sendable (Result<DeviceInfo, PairingError>) -> Void) {
        Task { body(await result(timeout: timeout)) }
    }

    /// The pairing's end as a sequence of one element.
    public func results(timeout: Duration? = nil) -> AsyncStream<Result<DeviceInfo, PairingError>> {
        AsyncStream { continuation in
            onResult(timeout: timeout) { result in
                continuation.yield(result)
                continuation.finish()
            }
        }
    }
}

/// One continuation, resumed at most once (the end or the timeout, whichever comes first).
private final class ResultBox: Sendable {
    private let state = Mutex<(CheckedContinuation<Result<DeviceInfo, PairingError>, Never>?, Result<DeviceInfo, PairingError>?)>((nil, nil))

    func set(_ continuation: CheckedContinuation<Result<DeviceInfo, PairingError>, Never>) {
        let early = state.withLock { state -> Result<DeviceInfo, PairingError>? in
            if let result = state.1 { return result }
            state.0 = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ result: Result<DeviceInfo, PairingError>) {
        let continuation = state.withLock { state -> CheckedContinuation<Result<DeviceInfo, PairingError>, Never>? in
            guard state.1 == nil else { return nil }
            state.1 = result
            defer { state.0 = nil }
            return state.0
        }
        continuation?.resume(returning: result)
    }
}

extension Agent {
    /// The activation counters; nil unless provisioning is on.
    public var provisioningCounters: ProvisioningCounters? { provisioning?.counters }

    func requireProvisioning() throws -> Provisioning {
        guard let provisioning else {
            throw ProvisioningError(.unavailable, "provisioning is off (config \"provisioning\": true, THING_AGENT_PROVISIONING)")
        }
        return provisioning
    }

    /// Makes a pairing: a token valid for `ttl`, for one device (of `productId` when given, in `spaceId`; a
    /// sub-device of `gatewayId` when given), and bootstrap broker credentials that reach only its activation topics.
    /// `dialect` "alink" makes it for an Alink device (the agent must speak Alink, config `dialects`): its id is
    /// `<productKey>.<deviceName>`, and its activation gives it Linkkit's user name and client id and its own Alink
    /// topics. A sub-device speaks its gateway's dialect.
    public func pair(spaceId: Int64? = nil, gatewayId: String? = nil, productId: String? = nil,
                     dialect: String? = nil, ttl: Duration = .seconds(600)) async throws -> PairingSession {
        let provisioning = try requireProvisioning()
        let asked = dialect
        var dialect = dialect == "native" ? nil : dialect
        if let dialect {
            guard dialect != TuyaLinkDialect.name else {
                throw ProvisioningError(.invalid, "a TuyaLink device signs its own login, which the broker cannot "
                                        + "check: connect it to the TuyaLink listener (deploy/mosquitto-tuyalink.conf) "
                                        + "and register its product in config deviceProducts")
            }
            guard AccessPolicy.pairingDialects.contains(dialect) else {
                throw ProvisioningError(.invalid, "the dialect must be one of native, "
                                        + AccessPolicy.pairingDialects.joined(separator: ", "))
            }
            guard configuration.dialects.contains(dialect) else {
                throw ProvisioningError(.invalid, "this agent does not speak \(dialect) (config dialects: "
                                        + configuration.dialects.joined(separator: ",") + ")")
            }
        }
        if let gatewayId {
            guard DeviceID.isValid(gatewayId) else { throw ProvisioningError(.invalid, "'\(gatewayId)' is not a device id") }
            guard (try provisioning.store.provisioned())[gatewayId] == .some(nil), cache.device(gatewayId) != nil else {
                throw ProvisioningError(.notFound, "the gateway \(gatewayId) is not an activated device with broker access of its own")
            }
            let gatewayDialect = try provisioning.store.provisionedDialects()[gatewayId]
            guard asked == nil || dialect == gatewayDialect else {
                throw ProvisioningError(.invalid, "a sub-device speaks its gateway's dialect: \(gatewayId) speaks "
                                        + (gatewayDialect ?? "native"))
            }
            dialect = gatewayDialect
        }
        guard ttl > .zero, ttl <= .seconds(30 * 86_400) else {
            throw ProvisioningError(.invalid, "the pairing's ttl must be between 1 s and 30 days")
        }
        // A bootstrap name the broker or the fleet already has is never taken over: another random one is drawn.
        var attempt = 0
        while true {
            attempt += 1
            let now = Timestamp.now()
            let pairing = Pairing(username: Secrets.bootstrapUsername(), spaceId: spaceId, gatewayId: gatewayId,
                                  productId: productId, createdAt: now,
                                  expiresAt: now + Millis(ttl.seconds * 1000), state: .pending, dialect: dialect)
            let made = NewPairing(pairing: pairing, token: Secrets.token(), password: Secrets.password())
            if cache.device(pairing.username) != nil { continue }
            try provisioning.store.insert(pairing, tokenHash: Secrets.hash(made.token))
            do {
                try await provisioning.access.createBootstrap(pairing.username, password: made.password)
            } catch let error as AccessManager.NameTaken where attempt < 5 {
                _ = try? provisioning.store.revoke(tokenHash: Secrets.hash(made.token), now: now)
                logger.notice("a drawn bootstrap name exists at the broker; drawing another", metadata: ["name": error.name])
                continue
            } catch {
                _ = try? provisioning.store.revoke(tokenHash: Secrets.hash(made.token), now: now)
                throw ProvisioningError(.unavailable, "could not create the pairing's broker credentials: \(error)")
            }
            logger.info("made a pairing", metadata: [
                "pairing": pairing.username, "expiresAt": "\(pairing.expiresAt)", "gateway": gatewayId ?? "-",
                "dialect": dialect ?? "native"])
            return PairingSession(made: made, provisioning: provisioning)
        }
    }

    /// Activations a stopped daemon left half done: their pairings are pending again and their devices leave the
    /// cache (the start's sync deletes what was made of their broker access).
    func resetInterruptedActivations() throws {
        guard let provisioning else { return }
        for pairing in try provisioning.store.resetInterrupted() {
            if let device = pairing.deviceId { try writer.remove(device, now: Timestamp.now()) }
        }
        try writer.flush()
    }


    /// Revokes a pending pairing by its token, or by its bootstrap user name as `pair list` shows it (tokens are
    /// shown once); its bootstrap credentials go at once.
    @discardableResult
    public func revokePairing(token: String) async throws -> Pairing {
        let provisioning = try requireProvisioning()
        let hash = try token.hasPrefix(Secrets.bootstrapPrefix)
            ? provisioning.store.tokenHash(username: token) ?? Secrets.hash(token) : Secrets.hash(token)
        guard let (pairing, revoked) = try provisioning.store.revoke(tokenHash: hash, now: Timestamp.now()) else {
            throw ProvisioningError(.notFound, "no pairing has this token")
        }
        guard revoked else {
            throw ProvisioningError(.ended, "the pairing \(pairing.username) already ended (\(pairing.state.rawValue))")
        }
        provisioning.ended(pairing.username, .failure(.revoked))
        await provisioning.cleanUp(now: Timestamp.now())
        return pairing
    }

    /// Every pairing, newest first.
    public func pairings() throws -> [Pairing] {
        try requireProvisioning().store.all()
    }

    // MARK: the daemon's side

    /// Answers activation requests until the queue ends.
    func serveActivations(_ provisioning: Provisioning) async {
        for await message in provisioning.stream {
            await activate(message, provisioning)
        }
    }

    /// Ends expired pairings and deletes ended pairings' bootstrap credentials, every second, until cancelled.
    func runPairingCleanup(_ provisioning: Provisioning) async {
        while !Task.isCancelled {
            await provisioning.cleanUp(now: Timestamp.now())
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func activate(_ message: MQTTMessage, _ provisioning: Provisioning) async {
        guard let user = topics.activationUser(message.topic), !message.payload.isEmpty else { return }
        let request = message.payload.count <= PayloadDecoder.maxPayloadBytes
            ? (try? JSONParser.parse(message.payload, maxDepth: PayloadDecoder.maxDepth))?.objectValue : nil
        let msgId = request?["msgId"]?.stringValue ?? ""
        let now = Timestamp.now()
        var answer = JSONObject([("msgId", .string(msgId)), ("time", .integer(now))])
        // A retained copy would keep the token at the broker and be replayed at every start: cleared before the
        // answer goes out, for every request (a live delivery does not say whether its publisher retained it).
        try? await client.publish(message.topic, payload: [], qos: .atLeastOnce, retain: true)
        do {
            // A retained request is an act of the past that the broker replays at every subscribe: never honoured.
            if message.retain { throw ActivationRefusal.badData("a retained activation is never honoured") }
            if let again = try provisioning.answerAgain(request, pairing: user, now: now) {
                answer["code"] = .integer(0)
                answer["data"] = .object(again)
                try? await client.publish(topics.activateResponse(user),
                                          payload: JSONValue.object(answer).serializedBytes(), qos: .atLeastOnce)
                logger.info("answered a repeated activation again", metadata: ["pairing": user])
                return
            }
            let (device, credentials) = try await bind(request, user: user, provisioning, now: now)
            try provisioning.store.complete(user, answer: credentials, now: Timestamp.now())
            provisioning.awaitFirstWord(device.devId, pairing: user)
            answer["code"] = .integer(0)
            answer["data"] = .object(credentials)
            try? await client.publish(topics.activateResponse(user), payload: JSONValue.object(answer).serializedBytes(),
                                      qos: .atLeastOnce)
            provisioning.counters.activations.add(1, ordering: .relaxed)
            events.publish([.activated(deviceId: device.devId, pairing: user, gatewayId: device.gatewayId)])
            provisioning.ended(user, .success(cache.device(device.devId)?.info ?? device))
            logger.info("device activated", metadata: [
                "device": device.devId, "pairing": user, "gateway": device.gatewayId ?? "-"])
        } catch {
            let refusal = error as? ActivationRefusal ?? ActivationRefusal(code: 1, reason: "\(error)")
            provisioning.refused(refusal, pairing: user, now: now)
            answer["code"] = .integer(Int64(refusal.code))
            answer["message"] = .string(refusal.reason)
            try? await client.publish(topics.activateResponse(user), payload: JSONValue.object(answer).serializedBytes(),
                                      qos: .atLeastOnce)
        }
    }

    /// Checks the request against its pairing, binds the device and gives it broker access; returns the device
    /// and the answer's `data`. A sub-device's grant is at the broker before this returns (its gateway publishes
    /// for it as soon as it reads the answer).
    private func bind(_ request: JSONObject?, user: String, _ provisioning: Provisioning,
                      now: Millis) async throws -> (DeviceInfo, JSONObject) {
        guard let request, var data = request["data"]?.objectValue else {
            throw ActivationRefusal.badData("not a JSON object (of at most 256 KiB) with a 'data' object")
        }
        guard let token = data["token"]?.stringValue else { throw ActivationRefusal.badData("no 'token'") }
        guard let pairing = try provisioning.store.pairing(tokenHash: Secrets.hash(token)), pairing.username == user else {
            throw ActivationRefusal.unknown
        }
        switch pairing.state(at: now) {
        case .pending: break
        case .activating, .used: throw ActivationRefusal.used
        case .expired, .revoked: throw ActivationRefusal.expired
        }
        guard let id = data["devId"]?.stringValue, DeviceID.isValid(id) else {
            throw ActivationRefusal.badData("'devId' must be a device id")
        }
        guard !provisioning.access.isReserved(id) else {
            throw ActivationRefusal(code: 1013, reason: "'\(id)' is a reserved broker name")
        }
        if pairing.dialect == "alink" {
            // An Alink device is <productKey>.<deviceName>, and its product is its product key.
            guard let (productKey, _) = AlinkDialect.split(id) else {
                throw ActivationRefusal.badData("an Alink device's 'devId' is <productKey>.<deviceName>")
            }
            let product = data["productId"]?.stringValue ?? String(productKey)
            guard product == productKey else {
                throw ActivationRefusal.badData("an Alink device's productId is its product key \(productKey)")
            }
            data["productId"] = .string(product)
        }
        if let product = pairing.productId, data["productId"]?.stringValue != product {
            throw ActivationRefusal.badData("the pairing is for the product \(product)")
        }
        if let gateway = pairing.gatewayId {
            guard data["gatewayId"]?.stringValue == gateway, data["category"]?.stringValue == "subdevice" else {
                throw ActivationRefusal.badData("the pairing is for a sub-device of \(gateway) (category subdevice, gatewayId \(gateway))")
            }
        }
        guard cache.device(id) == nil, id != user else { throw ActivationRefusal.bound }
        // A sub-device too: its gateway's role would gain that name's topics.
        if try await provisioning.access.isTakenAtBroker(id, dialect: pairing.dialect) {
            throw ActivationRefusal(code: 1013, reason: "the broker has a client or role named for '\(id)' that this agent did not make")
        }
        // The device's info from the request, its space from the pairing (a pairing without one gives none: the
        // device does not choose its space), checked before the claim so that a bad one leaves the token usable.
        var info = data
        info.removeValue(forKey: "token")
        info["devId"] = .string(id)
        info["spaceId"] = pairing.spaceId.map(JSONValue.integer)
        do {
            var probe = DeviceInfo(devId: id)
            var fields = info
            _ = try PayloadDecoder.dBm(fields.removeValue(forKey: "wifiSignal"), key: "wifiSignal")
            _ = try PayloadDecoder.dBm(fields.removeValue(forKey: "rsrp"), key: "rsrp")
            try probe.merge(fields)
        } catch {
            throw ActivationRefusal.badData("the device information in 'data' does not read as an info report: \(error)")
        }
        guard try provisioning.store.claim(user, device: id, gateway: pairing.gatewayId, now: now) else {
            // An expiry or a revoke won the race.
            let state = try provisioning.store.pairing(username: user)?.state(at: now)
            throw state == .expired || state == .revoked ? ActivationRefusal.expired : ActivationRefusal.used
        }
        do {
            // Through the receive path (journaled, cached, heard) as if the device had reported it.
            let report = JSONObject([("time", .integer(now)), ("data", .object(info))])
            receive(MQTTMessage(topic: topics.info(id), payload: JSONValue.object(report).serializedBytes(), qos: .atLeastOnce))
            guard let device = cache.device(id)?.info else {
                throw ActivationRefusal.badData("the device information in 'data' does not read as an info report")
            }
            if pairing.gatewayId != nil {
                try await provisioning.access.sync()
                return (device, JSONObject([("devId", .string(id))]))
            }
            let password = Secrets.password()
            try await provisioning.access.createDeviceClient(id, password: password, dialect: pairing.dialect)
            return (device, JSONObject([
                ("username", .string(AccessPolicy.brokerUser(id, dialect: pairing.dialect))),
                ("password", .string(password)),
                ("clientId", .string(AccessPolicy.brokerClientID(id, dialect: pairing.dialect))),
            ]))
        } catch {
            await rollBack(user, device: id, provisioning)
            throw error
        }
    }

    /// Undoes a claimed activation that failed: the token is usable again, the device leaves the cache and the
    /// records, and what was made of its broker access is deleted by the sync.
    private func rollBack(_ user: String, device: String, _ provisioning: Provisioning) async {
        do {
            try provisioning.store.unclaim(user, device: device)
            try writer.remove(device, now: Timestamp.now())
            try writer.flush()
            try await provisioning.access.sync()
        } catch {
            logger.warning("could not undo a failed activation", metadata: [
                "pairing": user, "device": device, "error": "\(error)"])
        }
    }
}

extension Agent {
    /// The daemon's provisioning over the cache file and an administration connection of the agent's own user.
    /// `clientID` names the administration connection (`<it>-access`); `timeout` bounds each plugin command.
    static func makeProvisioning(_ configuration: AgentConfiguration, cache: DeviceCache, logger: AgentLogger,
                                 clientID: String? = nil, timeout: Duration? = nil) throws -> Provisioning {
        guard let user = configuration.mqtt.username else {
            throw AgentConfiguration.Error(.setting, "provisioning needs the agent's broker user (username), the "
                                           + "dynamic-security plugin's admin")
        }
        // A service role on the agent's own user (or the CLI's) would lock the agent out of its own broker.
        if let wrong = configuration.provisioning.serviceUsers.first(where: { $0 == user || $0 == AccessPolicy.cliUser }) {
            throw AgentConfiguration.Error(.setting, "serviceUsers must not list '\(wrong)': it is the agent's or the "
                                           + "operators' CLI broker user, not a service's")
        }
        var mqtt = configuration.mqtt.connection(clientID: (clientID ?? configuration.mqtt.clientID) + "-access")
        mqtt.cleanSession = true
        let dynsec = try DynsecClient(configuration: mqtt,
                                      timeout: timeout ?? max(configuration.requestTimeout, .seconds(10)))
        var policy = AccessPolicy(topics: configuration.topics, agentClientID: configuration.mqtt.clientID,
                                  eventsTopic: configuration.events.topic, replyPrefix: configuration.api.replyPrefix)
        policy.homeAssistantPrefix = configuration.homeAssistant.discoveryPrefix
        let store = try PairingStore(path: configuration.cache.database)
        let access = AccessManager(dynsec: dynsec, policy: policy, agentUser: user,
                                   serviceUsers: configuration.provisioning.serviceUsers, store: store, cache: cache, logger: logger)
        return Provisioning(store: store, access: access, topics: configuration.topics, logger: logger)
    }
}

/// Tells the access manager of what changes who may speak for whom: a removal (the device's broker access goes)
/// and a replacement this agent started that finished (the sub-devices' topics move). A sub-device's info never
/// does: the `gatewayId` it names is anyone's word who may publish it. Also tells provisioning that a device was
/// heard from (its activation answer arrived). Called on the receive path: it only asks for a sync, which the
/// access manager runs (and paces) on its own task.
struct AccessWatch: CacheWatch {
    let provisioning: Provisioning

    func applied(_ changes: AppliedChanges, to device: String, now: Millis) {
        provisioning.heard(device)
        if let faulty = changes.replacedGateway {
            try? provisioning.store.moveSubDevices(from: faulty, to: device)
            provisioning.access.needsSync()
        }
    }

    func removed(_ device: String) {
        try? provisioning.store.forget(device)
        provisioning.access.needsSync()
    }
}

extension Agent {
    /// The API's `pair` (`spaceId`, `gatewayId`, `productId`, `dialect`, `ttl` seconds; answers `NewPairing.json`),
    /// `pairRevoke` (`token`) and `pairings` (every pairing).
    func apiPairing(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        do {
            return try await pairingResult(method, request)
        } catch let error as ProvisioningError {
            throw APIError(error.kind.rawValue, error.message)
        }
    }

    private func pairingResult(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        switch method {
        case "pair":
            func optionalText(_ key: String) throws -> String? {
                guard let value = request[key], !value.isNull else { return nil }
                guard let text = value.stringValue, !text.isEmpty else { throw APIError(400, "'\(key)' must be a string") }
                return text
            }
            var spaceId: Int64?
            if let value = request["spaceId"], !value.isNull {
                guard let id = value.int64Value else { throw APIError(400, "'spaceId' must be a whole number") }
                spaceId = id
            }
            let ttl = try Self.timeout(request["ttl"]) ?? .seconds(600)
            let session = try await pair(spaceId: spaceId, gatewayId: try optionalText("gatewayId"),
                                         productId: try optionalText("productId"),
                                         dialect: try optionalText("dialect"), ttl: ttl)
            return .object(session.made.json)
        case "pairRevoke":
            guard let token = request["token"]?.stringValue else { throw APIError(400, "'token' is missing") }
            return .object(try await revokePairing(token: token).json(now: Timestamp.now()))
        default:
            let now = Timestamp.now()
            return .array(try pairings().map { .object($0.json(now: now)) })
        }
    }
}
