import JSON
import ThingAgent

/// `thing-agent pair ...`: pairing tokens for devices to activate with (docs/provisioning.md).
enum PairCommand: Command {
    static let spec = CommandSpec(
        name: "pair",
        summary: "pairing tokens: make one (with bootstrap broker credentials), list them, revoke one",
        usage: """
            thing-agent pair [--space ID] [--gateway GW] [--product P] [--dialect D] [--ttl S] [--wait] [--json] \
            | pair list [--json] | pair revoke TOKEN|USER [options]
            """,
        options: [
            OptionSpec(name: "space", valueName: "ID", help: "the space the device joins (its info's spaceId)"),
            OptionSpec(name: "gateway", valueName: "GW", help: "a sub-device of GW, which activates it"),
            OptionSpec(name: "product", valueName: "P", help: "only a device of product P may use the token"),
            OptionSpec(name: "dialect", valueName: "D",
                       help: "native (default) or alink: the device speaks Alink (a sub-device: its gateway's)"),
            OptionSpec(name: "ttl", valueName: "S", help: "seconds the token is valid (default 600)"),
            OptionSpec(name: "wait", valueName: nil, help: "wait for the activation: exit 0 with the device, 5 at expiry"),
            OptionSpec(name: "json", valueName: nil, help: "print JSON"),
            daemonTimeoutOption,
        ] + CommonOptions.options,
        discussion: """
            Needs the daemon running with provisioning on ("provisioning": true): it keeps the pairing (the token
            only as its hash), creates the bootstrap broker credentials through mosquitto's dynamic-security plugin
            and answers the activation (docs/protocol.md, "Provisioning"). The token and the password are shown
            once. `pair list` reads the cache file: pending, used, expired and revoked pairings. `pair revoke` takes the
            token or the pairing's user name (pair-…) as `pair list` shows it.

            --dialect alink pairs an Alink device (the daemon must speak Alink, config "dialects"): it activates
            as <productKey>.<deviceName>, and its answer gives it Linkkit's user name <deviceName>&<productKey>
            and client id <productKey>&<deviceName>|securemode=-2,authType=connwl|, with access to its own
            Alink topics only (docs/provisioning.md, "Alink devices").

            """ + ExitCode.table,
        actions: ["list", "revoke"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        var configuration = try CommonOptions.configuration(arguments)
        try applyTimeout(arguments, to: &configuration)
        switch arguments.positionals.first {
        case nil: return try await make(arguments, configuration)
        case "list": return try list(arguments, configuration)
        case "revoke":
            guard arguments.positionals.count == 2 else {
                throw CommandFailure(code: .usage, message: "pair revoke takes one TOKEN\nUsage: \(spec.usage)")
            }
            let pairing = try await callDaemon("pairRevoke", JSONObject([("token", .string(arguments.positionals[1]))]),
                                               configuration)
            Console.out("pairing \(pairing["username"]?.stringValue ?? "") revoked; its broker credentials are deleted")
            return .success
        case let action?:
            throw CommandFailure(code: .usage, message: "unknown action '\(action)'\nUsage: \(spec.usage)")
        }
    }

    private static func make(_ arguments: ParsedArguments, _ configuration: AgentConfiguration) async throws -> ExitCode {
        var request = JSONObject()
        if let space = arguments.value("space") {
            guard let id = Int64(space) else { throw CommandFailure(code: .usage, message: "--space: '\(space)' is not a whole number") }
            request["spaceId"] = .integer(id)
        }
        if let gateway = arguments.value("gateway") {
            guard DeviceID.isValid(gateway) else { throw CommandFailure(code: .usage, message: "--gateway: '\(gateway)' is not a device id") }
            request["gatewayId"] = .string(gateway)
        }
        if let product = arguments.value("product") {
            guard !product.isEmpty else { throw CommandFailure(code: .usage, message: "--product needs a product id") }
            request["productId"] = .string(product)
        }
        if let dialect = arguments.value("dialect") {
            guard Dialects.names.contains(dialect) else {
                throw CommandFailure(code: .usage, message: "--dialect needs one of " + Dialects.names.joined(separator: ", "))
            }
            request["dialect"] = .string(dialect)
        }
        if let ttl = try seconds(arguments, "ttl") { request["ttl"] = .double(ttl) }
        let made = try await callDaemon("pair", request, configuration)
        let username = made["username"]?.stringValue ?? ""
        if arguments.has("json") {
            // With --wait, JSON lines written at once: the pairing now (the device needs its token), the device later.
            if arguments.has("wait") { Console.out(made.serialized()) } else { Format.printJSON(made) }
        } else {
            Console.out("""
                pairing \(username), valid until \(Format.date(made["expiresAt"]?.int64Value ?? 0))
                token     \(made["token"]?.stringValue ?? "")
                username  \(username)
                password  \(made["password"]?.stringValue ?? "")
                """)
        }
        guard arguments.has("wait") else { return .success }
        return try await waitForActivation(username, arguments, configuration)
    }

    /// Follows the pairing in the cache file until it ends.
    private static func waitForActivation(_ username: String, _ arguments: ParsedArguments,
                                          _ configuration: AgentConfiguration) async throws -> ExitCode {
        let store = try openExisting(configuration, verb: "read") { try PairingStore(path: $0, readOnly: true) }
        while true {
            let now = Timestamp.current
            let pairing = try editing { try store.all().first { $0.username == username } }
            guard let pairing else { throw CommandFailure(code: .failure, message: "the pairing \(username) is gone") }
            switch pairing.state(at: now) {
            case .pending, .activating:
                try await Task.sleep(for: .milliseconds(200))
            case .used:
                let id = pairing.deviceId ?? ""
                // The claim is written before the device's info reaches the file (the daemon's next flush): wait a
                // few seconds for it, so that the device printed is the one bound.
                var device = try openCache(configuration).device(id)
                let deadline = ContinuousClock.now + .seconds(5)
                while device == nil, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                    device = try openCache(configuration).device(id)
                }
                if arguments.has("json") {
                    Console.out(JSONValue.object(device?.json(now: now) ?? JSONObject([("devId", .string(id))])).serialized())
                } else {
                    Console.out("activated \(id)" + (pairing.gatewayId.map { " (a sub-device of \($0))" } ?? ""))
                }
                return .success
            case .expired, .revoked:
                Console.error("the pairing \(username) \(pairing.state(at: now) == .expired ? "expired" : "was revoked") "
                              + "before a device used it")
                return .timeout
            }
        }
    }

    private static func list(_ arguments: ParsedArguments, _ configuration: AgentConfiguration) throws -> ExitCode {
        let store = try openExisting(configuration, verb: "read") { try PairingStore(path: $0, readOnly: true) }
        let pairings = try editing { try store.all() }
        let now = Timestamp.current
        if arguments.has("json") {
            Format.printJSON(.array(pairings.map { .object($0.json(now: now)) }))
        } else if pairings.isEmpty {
            Console.out("no pairings")
        } else {
            Console.out(Format.table(["PAIRING", "STATE", "EXPIRES", "SPACE", "GATEWAY", "PRODUCT", "DIALECT", "DEVICE"],
                                     pairings.map {
                [$0.username, $0.state(at: now).rawValue, Format.date($0.expiresAt), $0.spaceId.map { "\($0)" } ?? "-",
                 $0.gatewayId ?? "-", $0.productId ?? "-", $0.dialect ?? "native", $0.deviceId ?? "-"]
            }))
        }
        return .success
    }

    /// Pairings are made and revoked by the daemon alone: it holds the broker's administration.
    private static func callDaemon(_ method: String, _ request: JSONObject,
                                   _ configuration: AgentConfiguration) async throws -> JSONValue {
        switch try await writeAccess(configuration) {
        case .daemon(let clientID):
            do {
                return try await DaemonAPI(configuration: configuration, daemon: clientID).call(method, request)
            } catch let refusal as DaemonAPI.Refusal {
                throw CommandFailure(code: refusal.code == 400 ? .usage : .failure, message: refusal.message)
            }
        case .here(let lock):
            withExtendedLifetime(lock) {}
            throw CommandFailure(code: .failure, message: """
                no daemon holds the cache \(configuration.cache.database): pairings are made by the daemon (thing-agent \
                run with "provisioning": true), which creates the broker credentials
                """)
        }
    }
}
