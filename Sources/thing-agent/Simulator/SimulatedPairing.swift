import JSON
import MQTT
import ThingAgent

/// A device's own broker credentials, from its activation (its client id is its user name: the broker pins it).
struct DeviceCredentials: Sendable {
    let username: String
    let password: String
    /// The client id they are pinned to, when it is not the user name (an Alink device's, Linkkit's form).
    var clientID: String? = nil
}

/// `simulate --provision`: the fleet starts unpaired. Each device and gateway gets a pairing from the daemon (its
/// API's `pair`, as `thing-agent pair` does), connects with the bootstrap credentials and activates itself; each
/// gateway then activates its sub-devices over its own connection (docs/protocol.md, "Provisioning").
struct SimulatedPairing {
    let configuration: AgentConfiguration
    /// The daemon's client id (its API lives under `thing-agent/api/<clientId>/`).
    let daemon: String

    var topics: Topics { configuration.topics }

    /// The credentials of every device with a connection of its own (sub-devices ride on their gateway's), each
    /// activated unless `kept` already has it (a device keeps what its activation gave it, across restarts).
    /// `kept` gains every device activated here, sub-devices included (with no credentials of their own).
    /// TuyaLink devices do not pair (`pairs`): they sign their own login, which the agent's broker credentials
    /// would not replace.
    func activate(_ plans: [DevicePlan], kept: inout KeptCredentials) async throws -> [String: DeviceCredentials] {
        var credentials = kept.credentials
        for plan in plans where plan.category != .subdevice && Self.pairs(plan) && !kept.has(plan.id) {
            var request = JSONObject([("spaceId", .integer(plan.spaceId))])
            // An Alink device's pairing says so: its activation gives it Alink credentials and topics.
            if plan.dialect == .alink { request["dialect"] = .string(plan.dialect.rawValue) }
            let made = try await pairing(request)
            var mqtt = Simulator.mqtt(configuration, clientID: made.username, will: nil)
            mqtt.username = made.username
            mqtt.password = made.password
            let answer = try await exchange(mqtt, pairing: made.username, token: made.token, plan)
            guard let user = answer["username"]?.stringValue, let password = answer["password"]?.stringValue else {
                throw CommandFailure(code: .failure, message: "the activation of \(plan.id) carried no credentials")
            }
            let clientID = answer["clientId"]?.stringValue
            credentials[plan.id] = DeviceCredentials(username: user, password: password,
                                                     clientID: clientID == user ? nil : clientID)
            try kept.add(plan.id, credentials[plan.id])
        }
        for plan in plans where plan.category == .subdevice && Self.pairs(plan) && !kept.has(plan.id) {
            guard let gateway = plan.gatewayId, let own = credentials[gateway] else { continue }
            let made = try await pairing(JSONObject([("spaceId", .integer(plan.spaceId)), ("gatewayId", .string(gateway))]))
            var mqtt = Simulator.mqtt(configuration, clientID: own.clientID ?? own.username, will: nil)
            mqtt.username = own.username
            mqtt.password = own.password
            _ = try await exchange(mqtt, pairing: made.username, token: made.token, plan)
            try kept.add(plan.id, nil)
        }
        return credentials
    }

    /// Whether the device pairs through the daemon: every one but TuyaLink's (`pair --dialect tuyalink` is
    /// refused: a TuyaLink device connects to the TuyaLink listener, its product registered in `deviceProducts`).
    static func pairs(_ plan: DevicePlan) -> Bool { plan.dialect != .tuyalink }

    private struct Made {
        let username: String
        let password: String
        let token: String
    }

    /// A pairing from the daemon; its API's per-client rate limit is waited out.
    private func pairing(_ request: JSONObject) async throws -> Made {
        let api = DaemonAPI(configuration: configuration, daemon: daemon)
        for _ in 0..<20 {
            do {
                let made = try await api.call("pair", request)
                guard let user = made["username"]?.stringValue, let password = made["password"]?.stringValue,
                      let token = made["token"]?.stringValue else {
                    throw CommandFailure(code: .failure, message: "the daemon's pairing carried no credentials")
                }
                return Made(username: user, password: password, token: token)
            } catch let refusal as DaemonAPI.Refusal where refusal.code == 429 {
                try await Task.sleep(for: .milliseconds(500))
            } catch let refusal as DaemonAPI.Refusal {
                throw CommandFailure(code: .failure, message: "the daemon made no pairing: \(refusal.message)")
            }
        }
        throw CommandFailure(code: .failure, message: "the daemon's API kept refusing: too many requests")
    }

    /// Connects as `mqtt`, publishes the activation for `plan` on the pairing's topic and returns the answer's
    /// `data`; a refusal or no answer within `requestTimeout` is an error.
    private func exchange(_ mqtt: MQTTConfiguration, pairing user: String, token: String,
                          _ plan: DevicePlan) async throws -> JSONObject {
        let client = try MQTTClient(configuration: mqtt)
        let answers = client.messages
        var data = JSONObject([
            ("token", .string(token)), ("devId", .string(plan.id)), ("name", .string(plan.name)),
            ("productId", .string(plan.productId)), ("category", .string(plan.category.rawValue)),
        ])
        if let gateway = plan.gatewayId { data["gatewayId"] = .string(gateway) }
        let request = JSONObject([("msgId", .string("act-\(plan.index)")), ("time", .integer(Timestamp.current)),
                                  ("data", .object(data))])
        do {
            try await client.connect()
            try await client.subscribe(topics.activateResponse(user), qos: .atLeastOnce)
            try await client.publish(topics.activate(user), payload: JSONValue.object(request).serializedBytes(),
                                     qos: .atLeastOnce)
        } catch {
            await client.disconnect()
            throw CommandFailure(code: .noBroker, message: "\(plan.id) cannot activate: \(error)")
        }
        let answer: JSONValue? = await withTimeout(configuration.requestTimeout) {
            for await message in answers {
                if let answer = try? JSONParser.parse(message.payload) { return answer }
            }
            return nil
        } expire: {
            await client.disconnect()
        }
        await client.disconnect()
        guard let answer else {
            throw CommandFailure(code: .timeout, message: "no answer to the activation of \(plan.id) (is the daemon "
                                 + "running with provisioning on?)")
        }
        guard answer["code"]?.int64Value == 0 else {
            throw CommandFailure(code: .refused, message: "the activation of \(plan.id) was refused: "
                                 + "\(answer["code"]?.int64Value ?? -1) \(answer["message"]?.stringValue ?? "")")
        }
        return answer["data"]?.objectValue ?? [:]
    }
}
