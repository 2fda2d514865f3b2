import FoundationEssentials
import Glibc
import JSON
import Platform
import ThingAgent

/// `thing-agent simulate`: a fleet of virtual devices on the broker that speak the whole protocol.
enum SimulateCommand: Command {
    static let spec = CommandSpec(
        name: "simulate",
        summary: "run virtual devices, gateways and sub-devices on the broker (for demos, tests, benchmarks)",
        usage: """
            thing-agent simulate [--devices N] [--gateways N] [--subdevices N] [--dialect D[,D...]] [--seed N]
              [--duration S] [--provision [--credentials FILE]] [--tuyalink-broker URL] [options]
                   thing-agent simulate [fleet options] --device-products
            """,
        options: [
            OptionSpec(name: "devices", valueName: "N", help: "plain Wi-Fi devices (lights; default 10)"),
            OptionSpec(name: "gateways", valueName: "N", help: "gateways, each able to replace the others (default 2)"),
            OptionSpec(name: "subdevices", valueName: "N", help: "sub-devices (sensors) per gateway (default 3)"),
            OptionSpec(name: "dialect", valueName: "D",
                       help: "native, alink or tuyalink, or several (native,alink,tuyalink) to split the fleet between "
                           + "them (default native)"),
            OptionSpec(name: "report-interval", valueName: "S", help: "seconds between property reports (default 10; 0: none)"),
            OptionSpec(name: "signal-interval", valueName: "S", help: "seconds between signal reports (default 5; 0: none)"),
            OptionSpec(name: "seed", valueName: "N", help: "same seed, same ids, names and values (default: random)"),
            OptionSpec(name: "ramp", valueName: "S", help: "bring the devices up over S seconds (default 0)"),
            OptionSpec(name: "duration", valueName: "S", help: "stop after S seconds (default 0: until SIGINT/SIGTERM)"),
            OptionSpec(name: "failure-rate", valueName: "F", help: "share of gateway transfers that fail, 0 to 1 (default 0)"),
            OptionSpec(name: "transfer-step", valueName: "S", help: "seconds between transfer stages (default 1)"),
            OptionSpec(name: "ota-failure-rate", valueName: "F", help: "share of firmware upgrades that fail, 0 to 1 (default 0)"),
            OptionSpec(name: "ota-fail-at", valueName: "STAGE",
                       help: "where they fail: download, verify, flash, rollback or stall (default flash)"),
            OptionSpec(name: "ota-step", valueName: "S", help: "seconds between firmware upgrade stages (default 1)"),
            OptionSpec(name: "max-connections", valueName: "N",
                       help: "broker connections at most, up to 300; devices beyond share pooled ones (default 250)"),
            OptionSpec(name: "provision", valueName: nil,
                       help: "start unpaired: each device pairs through the daemon and activates (gateways their sub-devices)"),
            OptionSpec(name: "credentials", valueName: "FILE",
                       help: "with --provision: keep what the activations gave in FILE, and connect with it next time"),
            OptionSpec(name: "tuyalink-broker", valueName: "URLS",
                       help: "where TuyaLink devices connect (a TuyaLink listener; default: --broker)"),
            OptionSpec(name: "device-products", valueName: nil,
                       help: "print the deviceProducts the agent needs for the fleet's TuyaLink devices (JSON), and exit"),
        ] + CommonOptions.options,
        discussion: """
            Every device publishes its retained status (online, with a time; its will is the offline form
            without one) and information, reports its properties and Wi-Fi signal, and answers
            properties/set (checked against its thing model: 1003 wrong type, 1004 unknown or read-only
            property, 1005 out of range; accepted values are then reported), info/get and wifi/scan.
            Gateways answer gateway/transfer/start (1006 while one runs) and go through deviceConfigInit,
            deviceDataInit, osConfigInit to finish, after which the faulty gateway's sub-devices report their
            new gateway. Sub-devices speak through their gateway's connection. Every device answers
            ota/start (1003 bad data, 1006 while an upgrade runs, 1007 a version not newer), reports
            downloading, verifying, flashing, rebooting (--ota-step apart), goes offline and comes back
            with the new firmwareVersion; --ota-failure-rate of them fail at --ota-fail-at instead.

            Each MQTT client has a network thread of its own, so one process keeps to --max-connections
            clients (default 250, at most 300); devices beyond that share pooled connections of up to 200 devices; those have no will (their
            offline status is published when the simulator stops, not when it is killed). Fleets over about
            1000 devices need the broker's max_queued_messages raised (deploy/mosquitto.conf: 100000), or
            mosquitto drops QoS 1 messages queued beyond 1000 for a subscriber that falls behind.

            --provision (the daemon runs with "provisioning": true, the broker with the dynamic-security plugin;
            the simulator's own user is the operators' CLI user): each device and gateway asks the daemon's API
            for a pairing, activates with its bootstrap credentials and connects with its own, its id as client
            id; each gateway then activates its sub-devices over its connection. Every device needs a connection
            of its own then (no pools).

            --dialect alink: the devices speak Alink as Alibaba's device SDK (Linkkit) does, on the agent's alink
            dialect (config "dialects": ["native","alink"]): id <productKey>.<name>, Linkkit's client id and user
            name, no will and no status; they inform their firmware version and post every property when they
            come up, send an NTP request, post an event now and then, answer property sets with code 200 and then
            post the values they applied, answer the service identify on identify_reply, and follow an upgrade
            push with progress steps and the new version. Alink gateways add their sub-devices to their topology
            and log them in, then post for them on their own /sys/ topics; they do no Wi-Fi scan and no gateway
            replacement.

            --dialect tuyalink: the devices speak TuyaLink as Tuya's C device SDK does, on the agent's tuyalink
            dialect (config "dialects"): id tl-<name>, client id tuyalink_<id>, the SDK's signed user name
            (<id>|signMethod=hmacSha256,timestamp=...) and HMAC-SHA256 password, which no broker here checks;
            MQTT 3.1.1, no will and no status, QoS 0. They report their firmware and every property when they
            come up, report properties and now and then an event, answer thing/property/set on set_response
            (the set's msgId, no code) and then report the values they applied, answer the action identify on
            execute_response, and follow ota/issue with progress and their new firmware. TuyaLink gateways bind
            their sub-devices, wait for the answer, log them in, and report for them on their own tylink/<sub>/
            topics and in batch reports. The wire never names a directly connected device's product: give the
            agent the fleet's (config deviceProducts or THING_AGENT_DEVICE_PRODUCTS), which --device-products
            prints and simulate prints when it starts. They do not pair (--provision leaves them out): they
            connect to --tuyalink-broker, a TuyaLink listener of their own (deploy/mosquitto-tuyalink.conf).

            --dialect native,alink,tuyalink (or any two) splits the devices and the gateways each in that order
            (of 24 devices the first 8 native, the next 8 Alink); a gateway's sub-devices speak its dialect.

            Products: p-light-1 (devices), p-gateway-1, p-sensor-1 (sub-devices), which TuyaLink devices share,
            and their Alink twins a1Light1, a1Gateway1, a1Sensor1 (TSL), built in; --models DIR replaces them by
            productId. Try it next to the agent:
              thing-agent run --models Config/models &
              thing-agent simulate --devices 20 --seed 7 &
              thing-agent watch
            """)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        let configuration = try CommonOptions.configuration(arguments)
        let options = try simulatorOptions(arguments)
        if arguments.has("device-products") {
            // What the agent needs before the fleet comes up: no broker, no models.
            Console.out(JSONValue.object(FleetPlan.deviceProducts(FleetPlan.make(options))).serialized())
            return .success
        }
        let models: ThingModels
        do {
            models = try BuiltinModels.load(directory: configuration.modelsDirectory)
        } catch {
            throw CommandFailure(code: .usage, message: "\(error)")
        }
        var credentials: [String: DeviceCredentials] = [:]
        if arguments.value("credentials") != nil, !arguments.has("provision") {
            throw CommandFailure(code: .usage, message: "--credentials goes with --provision")
        }
        if arguments.has("provision") {
            let plans = FleetPlan.make(options)
            let pairing = plans.filter(SimulatedPairing.pairs)
            guard ConnectionPlan(plans, maxConnections: options.maxConnections).pooledDevices == 0 else {
                throw CommandFailure(code: .usage, message: """
                    --provision gives every device and gateway a connection of its own: at most --max-connections                     (\(options.maxConnections)) of them
                    """)
            }
            var kept = try arguments.value("credentials").map(KeptCredentials.init(path:)) ?? KeptCredentials()
            let before = pairing.filter { kept.has($0.id) }.count
            credentials = try await SimulatedPairing(configuration: configuration, daemon: configuration.mqtt.clientID)
                .activate(plans, kept: &kept)
            Console.out("simulate: \(pairing.count - before) devices paired and activated through the daemon "
                        + "\(configuration.mqtt.clientID)" + (before > 0 ? ", \(before) with the credentials they kept" : ""))
        }
        let simulator: Simulator
        do {
            simulator = try Simulator(options: options, configuration: configuration, models: models,
                                      credentials: credentials)
            try await simulator.checkBroker(configuration)
        } catch {
            throw CommandFailure(code: .noBroker, message: "cannot use the broker \(configuration.mqtt.broker): \(error)")
        }
        printFleet(simulator, configuration: configuration)
        let work = Task { await simulator.run() }
        let signals = SignalWatcher([SIGINT, SIGTERM]) { _ in work.cancel() }
        await work.value
        signals.cancel()
        Console.out("simulate: stopped; \(simulator.stats.line)")
        return .success
    }

    static func simulatorOptions(_ arguments: ParsedArguments) throws -> SimulatorOptions {
        var options = SimulatorOptions()
        func count(_ name: String, _ target: inout Int, minimum: Int = 0, maximum: Int = 100_000,
                   why: String = "") throws {
            guard let text = arguments.value(name) else { return }
            guard let value = Int(text), value >= minimum, value <= maximum else {
                throw CommandFailure(code: .usage, message: "--\(name) needs a whole number from \(minimum) to \(maximum)\(why)")
            }
            target = value
        }
        func duration(_ name: String, _ target: inout Double, allowZero: Bool = true) throws {
            guard let text = arguments.value(name) else { return }
            guard let value = InputBounds.seconds(text, allowZero: allowZero) else {
                throw CommandFailure(code: .usage, message: "--\(name) needs a number of seconds"
                    + (allowZero ? " (0 or more)" : " above 0") + " up to \(Int(InputBounds.maxSeconds))")
            }
            target = value
        }
        // --dialects (a common option) is the agent's own setting, which the fleet does not follow: a fleet asked
        // for with it alone would silently speak the native dialect.
        if arguments.value("dialects") != nil, arguments.value("dialect") == nil {
            throw CommandFailure(code: .usage, message: "the fleet's dialect is --dialect (--dialects is the agent's)")
        }
        if let text = arguments.value("dialect") {
            let names = text.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingBlanks() }
            let dialects = names.compactMap(SimulatedDialect.init(rawValue:))
            guard !names.isEmpty, dialects.count == names.count, Set(dialects).count == dialects.count else {
                throw CommandFailure(code: .usage, message: "--dialect needs native, alink or tuyalink, or several "
                                     + "of them separated by commas (native,alink,tuyalink)")
            }
            options.dialects = dialects
        }
        if let text = arguments.value("tuyalink-broker") {
            let urls = text.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingBlanks() }
            guard urls.allSatisfy({ $0.hasPrefix("mqtt://") || $0.hasPrefix("mqtts://") }) else {
                throw CommandFailure(code: .usage, message: "--tuyalink-broker needs broker URLs, mqtt://host:port or "
                                     + "mqtts://host:port, comma-separated")
            }
            options.tuyaLinkBrokers = urls
        }
        try count("devices", &options.devices)
        try count("gateways", &options.gateways)
        try count("subdevices", &options.subdevicesPerGateway)
        try count("max-connections", &options.maxConnections, minimum: 1, maximum: 300,
                  why: " (each client has a network thread of its own)")
        try duration("report-interval", &options.reportInterval)
        try duration("signal-interval", &options.signalInterval)
        try duration("ramp", &options.ramp)
        try duration("duration", &options.duration)
        try duration("transfer-step", &options.transferStep, allowZero: false)
        try duration("ota-step", &options.otaStep, allowZero: false)
        if let text = arguments.value("ota-failure-rate") {
            guard let rate = Double(text), (0...1).contains(rate) else {
                throw CommandFailure(code: .usage, message: "--ota-failure-rate needs a number from 0 to 1")
            }
            options.otaFailureRate = rate
        }
        if let text = arguments.value("ota-fail-at") {
            guard let stage = UpgradeFailure(rawValue: text) else {
                throw CommandFailure(code: .usage, message: "--ota-fail-at needs one of "
                    + UpgradeFailure.allCases.map(\.rawValue).joined(separator: ", "))
            }
            options.otaFailAt = stage
        }
        if let text = arguments.value("failure-rate") {
            guard let rate = Double(text), (0...1).contains(rate) else {
                throw CommandFailure(code: .usage, message: "--failure-rate needs a number from 0 to 1")
            }
            options.failureRate = rate
        }
        if let text = arguments.value("seed") {
            guard let seed = UInt64(text) else {
                throw CommandFailure(code: .usage, message: "--seed needs a whole number from 0 to \(UInt64.max)")
            }
            options.seed = seed
        } else {
            options.seed = UInt64.random(in: 0...999_999)
        }
        guard options.total > 0 else {
            throw CommandFailure(code: .usage, message: "nothing to simulate: give --devices or --gateways")
        }
        if options.tuyaLinkBrokers != nil {
            // A pooled connection carries devices of every dialect to the one broker.
            let plans = FleetPlan.make(options)
            let pooled = ConnectionPlan(plans, maxConnections: options.maxConnections).links.filter(\.pooled)
                .flatMap(\.devices)
            let tuyaLink = Set(plans.filter { $0.dialect == .tuyalink }.map(\.id))
            guard !pooled.contains(where: tuyaLink.contains) else {
                throw CommandFailure(code: .usage, message: "--tuyalink-broker gives every TuyaLink device and gateway "
                                     + "a connection of its own: at most --max-connections (\(options.maxConnections)) of "
                                     + "them with the others")
            }
        }
        return options
    }

    static func printFleet(_ simulator: Simulator, configuration: AgentConfiguration) {
        let options = simulator.options
        let plan = simulator.connectionPlan
        let gateways = options.gateways == 0 ? "no gateways"
            : "\(options.gateways) gateways with \(options.subdevicesPerGateway) sub-devices each"
        let dialects = [(SimulatedDialect.alink, "Alink"), (.tuyalink, "TuyaLink")].map { dialect, name -> String in
            let count = simulator.devices.filter { $0.plan.dialect == dialect }.count
            return count == 0 ? "" : count == simulator.devices.count ? ", speaking \(name)"
                : ", \(count) of them speaking \(name)"
        }.joined()
        Console.out("""
            simulate: \(options.total) devices (\(options.devices) devices, \(gateways)) on \(configuration.mqtt.broker) \
            under \(configuration.topicRoot)/\(dialects), seed \(options.seed), \(plan.links.count) connections\
            \(plan.pooledDevices > 0 ? " (\(plan.pooledDevices) devices on pooled connections)" : "")
            """)
        let shown = 20
        let rows = simulator.devices.prefix(shown).map { device -> [String] in
            [device.id, device.plan.category.rawValue, device.plan.productId, device.plan.gatewayId ?? "", device.plan.name]
        }
        Console.out(Format.table(["ID", "CATEGORY", "PRODUCT", "GATEWAY", "NAME"], rows))
        if simulator.devices.count > shown {
            Console.out("… and \(simulator.devices.count - shown) more (thing-agent devices lists them all)")
        }
        // The TuyaLink wire never names a directly connected device's product: the agent must be told.
        let products = FleetPlan.deviceProducts(simulator.devices.map(\.plan))
        if !products.isEmpty {
            Console.out("simulate: TuyaLink devices on \(options.tuyaLinkBrokers?.joined(separator: ",") ?? configuration.mqtt.broker); "
                        + "the agent needs their products (config deviceProducts, or THING_AGENT_DEVICE_PRODUCTS): "
                        + JSONValue.object(products).serialized())
        }
    }
}
