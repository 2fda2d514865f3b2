import JSON
import ThingAgentCore

/// The API methods that send a request to a device for a client (the CLI, a service): the daemon sends it, tracks
/// it, writes what the answer changes, and answers the client. A request the device did not answer well is code
/// 502 with the request's error (`RequestError.json`) beside the message as `error`.
extension Agent {
    func apiDeviceRequest(_ method: String, _ request: JSONObject, device id: String) async throws -> JSONValue {
        let timeout = try apiTimeout(request["timeout"])
        switch method {
        case "fetch":
            _ = try await Self.requesting { () async throws(RequestError) in try await fetchInfo(id, timeout: timeout) }
            // In the file before the answer: a client that reads the file next sees what was fetched.
            try? writer.flush()
            guard let snapshot = cache.device(id) else { throw APIError(404, "unknown device '\(id)'") }
            return .object(snapshot.json(now: Timestamp.now(), metadata: try? local?.metadata(id)))
        case "wifiScan":
            let force = request["force"]?.boolValue ?? false
            let networks = try await Self.requesting { () async throws(RequestError) in
                try await scanWifiList(id, timeout: timeout, force: force)
            }
            return .array(networks.map { .object($0.json) })
        case "gateways":
            guard cache.device(id) != nil else { throw APIError(404, "unknown device '\(id)'") }
            return .array(gatewayTransferManager(deviceId: id).gateways().map { candidate in
                var object = candidate.json(now: Timestamp.now())
                object["subDeviceCount"] = .integer(Int64(cache.subDevices(of: candidate.id).count))
                return .object(object)
            })
        default:
            return try await Self.requesting { () async throws(RequestError) in
                try await apiTransfer(request, gateway: id, timeout: timeout)
            }
        }
    }

    /// `body`'s result; its request error as the API answers it.
    private static func requesting<T>(_ body: () async throws(RequestError) -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw APIError(502, error.description, error: error.json)
        }
    }

    /// Starts `gateway`'s transfer from `from`; this agent records the start, follows the progress and ends a
    /// stalled one itself. The answer names the sub-devices that move and the stall timeout that applies.
    private func apiTransfer(_ request: JSONObject, gateway: String,
                             timeout: Duration?) async throws(RequestError) -> JSONValue {
        guard let faulty = request["from"]?.stringValue, DeviceID.isValid(faulty) else {
            throw .unsupported(deviceId: gateway, reason: "'from' must name the faulty gateway by its device id")
        }
        let moving = cache.subDevices(of: faulty).map(\.id)
        let started = try await gatewayTransferManager(deviceId: gateway).transfer(fromGateway: faulty, timeout: timeout)
        var transfer = started.json
        transfer["updatedAt"] = .integer(started.updatedAt)
        return .object(JSONObject([
            ("transfer", .object(transfer)), ("moving", .array(moving.map(JSONValue.string))),
            ("stallTimeout", .double(configuration.transferStallTimeout.seconds)),
        ]))
    }

    /// A detail page, laid out by the request's `config` (a deviceDetailConfig object) or this agent's layout;
    /// `timeout` bounds the live network check.
    func apiDetail(_ id: String, _ request: JSONObject) async throws -> JSONValue {
        var layout = detailConfig
        if let config = request["config"], !config.isNull {
            do {
                layout = try DetailConfig(json: config)
            } catch {
                throw APIError(400, "'config': \(error.description)")
            }
        }
        let composer = DeviceDetailComposer(agent: self, config: layout,
                                            networkTimeout: try apiTimeout(request["timeout"]))
        return .object(await composer.compose(id).json)
    }
}
