import FoundationEssentials
import JSON
import MQTT
import Platform
import ThingAgentCore

/// Everything the agent needs to run. Read from a JSON file (`Config/agent.json` documents every key),
/// then environment variables override it, then command-line flags override both.
public struct AgentConfiguration: Sendable, Equatable {
    /// The broker connection.
    public var mqtt = MQTT()
    /// The cache file and what it may hold.
    public var cache = Cache()
    /// The request/response API over MQTT.
    public var api = API()
    /// The event feed published over MQTT.
    public var events = Events()
    /// Access management through mosquitto's dynamic-security plugin.
    public var provisioning = Provisioning()
    /// Instances on several hosts of which one acts and the others stand by (docs/operations.md, "Two hosts").
    public var group = Group()
    /// Home Assistant's MQTT discovery of the fleet, its states and commands (docs/home-assistant.md).
    public var homeAssistant = HomeAssistant()

    /// The first level of the device topics (`<topicRoot>/<D>/...`).
    public var topicRoot = "things"
    /// The wire dialects the agent speaks at once, on one broker (docs/protocol.md): `native`, `alink`, `tuyalink`.
    public var dialects = ["native"]
    /// The product of each device whose wire never names it (a directly connected TuyaLink device), by device id:
    /// its thing model, and what sets and actions to it are checked against.
    public var deviceProducts: [String: String] = [:]
    /// How long a request waits for its answer.
    public var requestTimeout: Duration = .seconds(10)
    /// At most this many requests wait for answers at once; one more fails at once with `.tooManyInFlight`.
    public var maxInFlight = 10_000
    /// A device offline for longer than this produces one offline warning.
    public var offlineGracePeriod: Duration = .seconds(30)
    /// A gateway transfer with no status change for this long ends as failed with failedCode `timeout`.
    public var transferStallTimeout: Duration = .seconds(120)
    /// The firmware catalog (latest version per product) read by `firmware`, `ota --latest` and the detail page.
    public var firmwareCatalog: String?
    /// A firmware upgrade with no progress for this long ends as failed with failedCode `timeout`.
    public var otaStallTimeout: Duration = .seconds(300)
    /// Thing models (`<productId>.json`) used to check property sets.
    public var modelsDirectory: String?
    /// The scenes file (`thing-agent scene`).
    public var scenesFile: String?
    /// `HOST:PORT` to serve Prometheus metrics (`GET /metrics`) and the health check (`GET /health`) on; nil
    /// (the default) serves nothing.
    public var metricsAddress: String?
    /// Re-link sub-devices on a `finish` for a transfer started elsewhere (not through this agent), when the
    /// gateway is eligible: known, with the gatewayTransfer ability, of the faulty gateway's product and space.
    public var trustForeignTransfers = false
    /// The device-detail config (`thing-agent detail`, the API's `detail`), in the SDKs' deviceDetailConfig.json
    /// format; nil uses the built-in default layout.
    public var detailConfig: String?
    public var logLevel: AgentLogger.Level = .info
    public var logFormat: LogFormat = .text

    public init() {}

    /// The broker connection (keys `broker` to `reconnectMaxDelay` of the file).
    public struct MQTT: Sendable, Equatable {
        /// The brokers, tried in order (the nodes of a cluster, say): `mqtt://host:port` or `mqtts://host:port`
        /// each, all of one scheme. A lost connection goes on with the next one (docs/brokers.md).
        public var brokers = ["mqtt://127.0.0.1:1883"]
        /// `brokers` comma-separated, as the key `broker` takes them; setting one URL makes it the only broker.
        public var broker: String {
            get { brokers.joined(separator: ",") }
            set { brokers = newValue.split(separator: ",").map { $0.trimmingBlanks() } }
        }
        public var username: String?
        public var password: String?
        public var caFile: String?
        public var certFile: String?
        public var keyFile: String?
        public var verifyHostname = true
        /// Stable by default, so that the broker keeps the agent's session across restarts.
        public var clientID = "thing-agent"
        /// "auto", "5" or "3.1.1" in the file (key `mqttVersion`). `.auto`: MQTT 5, and 3.1.1 with each broker that
        /// refuses 5 (NATS's MQTT, for one).
        public var version: MQTTProtocolVersion = .auto
        /// Keep a persistent session: QoS 1 reports published while the agent is down reach it when it returns.
        public var persistentSession = true
        /// MQTT 5 session expiry in seconds (how long the broker keeps the session while the agent is away); a broker
        /// spoken to in 3.1.1 keeps it until a clean-session connect.
        public var sessionExpiry: Double = 7 * 24 * 3600
        public var keepAlive: Double = 30
        public var reconnectMinDelay: Duration = .milliseconds(100)
        public var reconnectMaxDelay: Duration = .seconds(30)

        public init() {}

        /// The broker connection these settings describe (address, credentials, TLS, keepalive, MQTT version,
        /// reconnect delays), as `clientID`, with a clean session and no will.
        public func connection(clientID: String) -> MQTTConfiguration {
            var mqtt = MQTTConfiguration(brokers: brokers, clientID: clientID)
            mqtt.username = username
            mqtt.password = password
            if caFile != nil || certFile != nil || keyFile != nil || !verifyHostname {
                mqtt.tls = MQTTTLS(caFile: caFile, certFile: certFile, keyFile: keyFile, verifyHostname: verifyHostname)
            }
            mqtt.keepAlive = Int(keepAlive)
            mqtt.protocolVersion = version
            mqtt.reconnectMinDelay = reconnectMinDelay
            mqtt.reconnectMaxDelay = reconnectMaxDelay
            // Room for a whole batch of the event feed (and more sets in flight) without waiting in the library.
            mqtt.sendMaximum = EventPublisher.batchLimit * 2
            return mqtt
        }
    }

    /// The cache file and what it may hold (keys `database`, `flushInterval`, `maxDevices`,
    /// `maxPropertiesPerDevice`, `maxClockSkew`).
    public struct Cache: Sendable, Equatable {
        public var database = "thing-agent.sqlite"
        /// How long a batch of changes gathers in memory (and in the journal) before it is written to SQLite in
        /// one transaction. Larger values mean fewer, bigger transactions; nothing acknowledged is lost either way.
        public var flushInterval: Duration = .milliseconds(50)
        /// Devices the cache holds; messages from new devices beyond are refused.
        public var maxDevices = 1_000_000
        /// Property codes one device may have; new codes beyond are refused.
        public var maxPropertiesPerDevice = 512
        /// A report time further ahead of the agent's clock than this (seconds) is replaced by the arrival time.
        public var maxClockSkew: Double = 300

        public init() {}
    }

    /// The request/response API on `thing-agent/api/<clientId>/request/<method>` (keys `serveAPI`,
    /// `replyPrefix`, `apiPageSize`, `apiRateLimit`, `apiRateLimitTotal`, `apiMaxTimeout`, `apiInFlightPerClient`).
    public struct API: Sendable, Equatable {
        /// Answer the API (the daemon only).
        public var enabled = true
        /// API answers go only to topics under this prefix (`replyTo`, the MQTT 5 response topic); the first
        /// level below it names the client for the rate limit.
        public var replyPrefix = "thing-agent/replies/"
        /// Devices in one page of the API's `devices` when the request gives no `limit`.
        public var pageSize = 100
        /// API requests per second one client may make (a burst of as many, at least one); 0: no limit.
        public var rateLimit: Double = 20
        /// API requests per second from all clients together (a burst of as many); 0: no limit. The client a
        /// request names is its own choice, so this bounds what a requester rotating made-up names can make the
        /// agent do.
        public var rateLimitTotal: Double = 200
        /// The longest `timeout` a request may ask for; a longer one is refused (400), so that no client can park
        /// requests for days.
        public var maxTimeout: Duration = .seconds(300)
        /// Device requests one client's API calls may have waiting for answers at once (a `groupSet` holds one
        /// per member); one more fails with `tooManyInFlight` naming this limit, so that one client cannot take
        /// all of `maxInFlight`.
        public var maxInFlightPerClient = 2_500

        public init() {}
    }

    /// The event feed (keys `publishEvents`, `eventsTopic`, `eventQueueLimit`, `eventsQoS`).
    public struct Events: Sendable, Equatable {
        /// Publish every listener event as JSON on `<topic>/<D>/<kind>` (the daemon only).
        public var publish = true
        public var topic = "thing-agent/events"
        /// Events waiting to be published; beyond it they are dropped and counted.
        public var queueLimit = 4096
        /// The QoS of the feed (0, 1 or 2). 1 by default: an offline warning is worth an acknowledgement.
        public var qos = 1

        public init() {}
    }

    /// Access management through mosquitto's dynamic-security plugin: pairings, activation, one role per device
    /// (docs/provisioning.md); keys `provisioning` and `serviceUsers`.
    public struct Provisioning: Sendable, Equatable {
        /// Off keeps the broker's own (static) access control.
        public var enabled = false
        /// The services' broker users, each given the service role and its own replies.
        public var serviceUsers: [String] = []

        public init() {}
    }

    /// Standby instances: two or more daemons, each on its own host with its own cache file and client id, in one
    /// group (keys `agentGroup`, `failoverTimeout`). Every instance keeps the whole cache; only the active one acts,
    /// holding a lease through the broker, and a standby takes over when the lease lapses.
    public struct Group: Sendable, Equatable {
        /// The group's name; nil (the default): no group, this agent alone acts. Letters, digits, `-` and `_`.
        public var name: String?
        /// How long after the active instance is lost (killed, its host gone, its connection cut) a standby has
        /// taken over.
        public var failoverTimeout: Duration = .seconds(5)

        public init() {}

        /// Whether `name` can name a group: it is a topic level (NATS takes no `.` or space in one).
        public static func isValidName(_ name: String) -> Bool {
            !name.isEmpty && name.utf8.count <= 64
                && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
                    || $0 == "-" || $0 == "_") }
        }
    }

    /// The name the daemon's API is addressed by: the group's when there is one (whichever instance is active
    /// answers), else the daemon's client id.
    public var apiName: String { group.name ?? mqtt.clientID }


    /// Home Assistant's MQTT discovery (key `homeAssistant`: `true`, `false`, or an object of these fields;
    /// docs/home-assistant.md): one Home Assistant device per agent device, its entities from the thing model, its
    /// state and availability, and commands through the tracked set path. The daemon alone publishes.
    public struct HomeAssistant: Sendable, Equatable {
        /// Off by default; turned off after it was on, the daemon removes what it published at its next start.
        public var enabled = false
        /// Where Home Assistant looks for discovery (`<prefix>/device/<object id>/config`) and says it is back
        /// (`<prefix>/status`), as set in its MQTT integration.
        public var discoveryPrefix = "homeassistant"
        /// Under the agent's own prefix: the devices' states and availability (`<topic>/<D>/state`,
        /// `<topic>/<D>/availability`, retained) and the commands Home Assistant sends (`<topic>/<D>/set`).
        public var topic = "thing-agent/ha"
        /// At most this many discovery, state and availability messages a second, so that publishing a whole
        /// fleet after a start or a Home Assistant restart never holds up what devices report.
        public var publishRate: Double = 2000

        public init() {}

        /// The keys of the object form.
        static let fields = ["enabled", "discoveryPrefix", "topic", "publishRate"]

        /// Applies `true`/`false` (enabled only) or an object of `fields`; false when the value cannot be used.
        mutating func apply(_ value: JSONValue) -> Bool {
            if let on = value.boolValue {
                enabled = on
                return true
            }
            var value = value
            // From the environment or a flag: the object as JSON text.
            if let text = value.stringValue, text.hasPrefix("{"),
               let parsed = try? JSONParser.parse(Array(text.utf8)) { value = parsed }
            guard let object = value.objectValue else { return false }
            var next = self
            for (key, field) in object {
                switch key {
                case "enabled":
                    guard let on = field.boolValue else { return false }
                    next.enabled = on
                case "discoveryPrefix", "topic":
                    guard let text = field.stringValue, Self.isTopicPrefix(text) else { return false }
                    if key == "topic" { next.topic = text } else { next.discoveryPrefix = text }
                case "publishRate":
                    guard let rate = field.doubleValue, rate >= 10, rate <= 1_000_000 else { return false }
                    next.publishRate = rate
                default:
                    return false
                }
            }
            self = next
            return true
        }

        /// Levels without wildcards, none empty, no leading or trailing slash.
        static func isTopicPrefix(_ text: String) -> Bool {
            !text.isEmpty && !text.contains("+") && !text.contains("#") && !text.hasPrefix("/") && !text.hasSuffix("/")
                && !text.contains("//") && text.utf8.count <= 200
        }
    }

    /// The retained topic on which the agent announces itself (online) and its will (offline).
    public var announceTopic: String { "thing-agent/agents/\(mqtt.clientID)/status" }

    public var topics: Topics { Topics(root: topicRoot) }

    /// The dialects `dialects` names, on `topicRoot`.
    package var wire: Dialects { Dialects(names: dialects, topics: topics, products: deviceProducts) }

    /// A client id of its own for a short-lived command, made from the agent's client id, so that it never takes
    /// over the daemon's session.
    public var commandClientID: String {
        "\(mqtt.clientID)-cli-\(ProcessInfo.processInfo.processIdentifier)-\(UInt16.random(in: 0...UInt16.max))"
    }

    // MARK: loading

    /// What a file, variable or flag that cannot be used throws: it names the source, the key and the reason.
    public typealias Error = ConfigError

    /// The keys of the JSON file, each with how to apply a value; the environment and flags use the same table.
    static let keys: [(key: String, env: String, apply: @Sendable (inout AgentConfiguration, JSONValue) -> Bool)] = [
        ("broker", "THING_AGENT_BROKER", { c, v in
            guard let urls = stringList(v, trimming: true), !urls.isEmpty, !urls.contains(where: \.isEmpty),
                  Set(urls).count == urls.count else { return false }
            c.mqtt.brokers = urls
            return true
        }),
        ("username", "THING_AGENT_USERNAME", { c, v in setOptional(&c.mqtt.username, v) }),
        ("password", "THING_AGENT_PASSWORD", { c, v in setOptional(&c.mqtt.password, v) }),
        ("caFile", "THING_AGENT_CA_FILE", { c, v in setOptional(&c.mqtt.caFile, v) }),
        ("certFile", "THING_AGENT_CERT_FILE", { c, v in setOptional(&c.mqtt.certFile, v) }),
        ("keyFile", "THING_AGENT_KEY_FILE", { c, v in setOptional(&c.mqtt.keyFile, v) }),
        ("verifyHostname", "THING_AGENT_VERIFY_HOSTNAME", { c, v in setBool(&c.mqtt.verifyHostname, v) }),
        ("clientId", "THING_AGENT_CLIENT_ID", { c, v in set(&c.mqtt.clientID, v) }),
        ("mqttVersion", "THING_AGENT_MQTT_VERSION", { c, v in
            switch v.stringValue {
            case "auto": c.mqtt.version = .auto
            case "5": c.mqtt.version = .v5
            case "3.1.1": c.mqtt.version = .v311
            default: return false
            }
            return true
        }),
        ("persistentSession", "THING_AGENT_PERSISTENT_SESSION", { c, v in setBool(&c.mqtt.persistentSession, v) }),
        ("sessionExpiry", "THING_AGENT_SESSION_EXPIRY", { c, v in setNumber(&c.mqtt.sessionExpiry, v) }),
        ("keepAlive", "THING_AGENT_KEEPALIVE", { c, v in
            // MQTT carries the keepalive in 16 bits; libmosquitto takes 5 s or more.
            guard let d = v.doubleValue, d >= 5, d <= 65535 else { return false }
            c.mqtt.keepAlive = d
            return true
        }),
        ("topicRoot", "THING_AGENT_TOPIC_ROOT", { c, v in
            guard let s = v.stringValue, !s.isEmpty, !s.contains("+"), !s.contains("#") else { return false }
            c.topicRoot = s
            return true
        }),
        ("dialects", "THING_AGENT_DIALECTS", { c, v in
            guard let names = stringList(v, trimming: true), !names.isEmpty, Set(names).count == names.count,
                  names.allSatisfy(Dialects.names.contains) else { return false }
            c.dialects = names
            return true
        }),
        ("deviceProducts", "THING_AGENT_DEVICE_PRODUCTS", { c, v in
            // From the environment or a flag: the object as JSON text, or `id=product,id=product`.
            var value = v
            if let text = v.stringValue {
                if text.hasPrefix("{") {
                    guard let parsed = try? JSONParser.parse(Array(text.utf8)) else { return false }
                    value = parsed
                } else {
                    var pairs = JSONObject()
                    for pair in text.split(separator: ",") {
                        let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingBlanks() }
                        guard parts.count == 2 else { return false }
                        pairs[parts[0]] = .string(parts[1])
                    }
                    value = .object(pairs)
                }
            }
            guard let object = value.objectValue else { return false }
            var products: [String: String] = [:]
            for (device, product) in object {
                guard DeviceID.isValid(device), let product = product.stringValue, !product.isEmpty,
                      product.utf8.count <= 64 else { return false }
                products[device] = product
            }
            c.deviceProducts = products
            return true
        }),
        ("database", "THING_AGENT_DB", { c, v in set(&c.cache.database, v) }),
        ("flushInterval", "THING_AGENT_FLUSH_INTERVAL", { c, v in setDuration(&c.cache.flushInterval, v) }),
        ("requestTimeout", "THING_AGENT_REQUEST_TIMEOUT", { c, v in setDuration(&c.requestTimeout, v) }),
        ("maxInFlight", "THING_AGENT_MAX_IN_FLIGHT", { c, v in
            guard let n = v.int64Value, n > 0 else { return false }
            c.maxInFlight = Int(n)
            return true
        }),
        ("offlineGracePeriod", "THING_AGENT_OFFLINE_GRACE", { c, v in setDuration(&c.offlineGracePeriod, v) }),
        ("transferStallTimeout", "THING_AGENT_TRANSFER_STALL_TIMEOUT", { c, v in
            guard let d = v.doubleValue.flatMap({ InputBounds.seconds($0) }) else { return false }
            c.transferStallTimeout = .seconds(d)
            return true
        }),
        ("firmwareCatalog", "THING_AGENT_FIRMWARE_CATALOG", { c, v in setOptional(&c.firmwareCatalog, v) }),
        ("otaStallTimeout", "THING_AGENT_OTA_STALL_TIMEOUT", { c, v in
            guard let d = v.doubleValue.flatMap({ InputBounds.seconds($0) }) else { return false }
            c.otaStallTimeout = .seconds(d)
            return true
        }),
        ("reconnectMinDelay", "THING_AGENT_RECONNECT_MIN", { c, v in setDuration(&c.mqtt.reconnectMinDelay, v) }),
        ("reconnectMaxDelay", "THING_AGENT_RECONNECT_MAX", { c, v in setDuration(&c.mqtt.reconnectMaxDelay, v) }),
        ("modelsDirectory", "THING_AGENT_MODELS", { c, v in setOptional(&c.modelsDirectory, v) }),
        ("scenesFile", "THING_AGENT_SCENES", { c, v in setOptional(&c.scenesFile, v) }),
        ("publishEvents", "THING_AGENT_PUBLISH_EVENTS", { c, v in setBool(&c.events.publish, v) }),
        ("eventsTopic", "THING_AGENT_EVENTS_TOPIC", { c, v in
            guard let s = v.stringValue, !s.isEmpty, !s.contains("+"), !s.contains("#") else { return false }
            c.events.topic = s
            return true
        }),
        ("eventQueueLimit", "THING_AGENT_EVENT_QUEUE", { c, v in
            guard let n = v.int64Value, n > 0 else { return false }
            c.events.queueLimit = Int(n)
            return true
        }),
        ("eventsQoS", "THING_AGENT_EVENTS_QOS", { c, v in
            guard let n = v.int64Value, (0...2).contains(n) else { return false }
            c.events.qos = Int(n)
            return true
        }),
        ("metricsAddress", "THING_AGENT_METRICS", { c, v in
            if v.isNull {
                c.metricsAddress = nil
                return true
            }
            guard let s = v.stringValue, s.isEmpty || MetricsAddress(s) != nil else { return false }
            c.metricsAddress = s.isEmpty ? nil : s
            return true
        }),
        ("serveAPI", "THING_AGENT_SERVE_API", { c, v in setBool(&c.api.enabled, v) }),
        ("replyPrefix", "THING_AGENT_REPLY_PREFIX", { c, v in
            guard let s = v.stringValue, !s.isEmpty, !s.contains("+"), !s.contains("#") else { return false }
            // Without the slash the prefix would also match look-alikes (`thing-agent/replies-x/…`).
            c.api.replyPrefix = s.hasSuffix("/") ? s : s + "/"
            return true
        }),
        ("apiPageSize", "THING_AGENT_API_PAGE_SIZE", { c, v in setCount(&c.api.pageSize, v, max: maxPageSize) }),
        ("apiRateLimit", "THING_AGENT_API_RATE_LIMIT", { c, v in
            guard let d = v.doubleValue, d >= 0, d <= 1_000_000 else { return false }
            c.api.rateLimit = d
            return true
        }),
        ("apiRateLimitTotal", "THING_AGENT_API_RATE_LIMIT_TOTAL", { c, v in
            guard let d = v.doubleValue, d >= 0, d <= 1_000_000 else { return false }
            c.api.rateLimitTotal = d
            return true
        }),
        ("apiMaxTimeout", "THING_AGENT_API_MAX_TIMEOUT", { c, v in
            guard let d = v.doubleValue.flatMap({ InputBounds.seconds($0) }) else { return false }
            c.api.maxTimeout = .seconds(d)
            return true
        }),
        ("apiInFlightPerClient", "THING_AGENT_API_IN_FLIGHT_PER_CLIENT", { c, v in
            setCount(&c.api.maxInFlightPerClient, v, max: 1_000_000_000)
        }),
        ("maxClockSkew", "THING_AGENT_MAX_CLOCK_SKEW", { c, v in setNumber(&c.cache.maxClockSkew, v) }),
        ("maxPropertiesPerDevice", "THING_AGENT_MAX_PROPERTIES", { c, v in
            setCount(&c.cache.maxPropertiesPerDevice, v, max: 1_000_000)
        }),
        ("maxDevices", "THING_AGENT_MAX_DEVICES", { c, v in setCount(&c.cache.maxDevices, v, max: 1_000_000_000) }),
        ("trustForeignTransfers", "THING_AGENT_TRUST_FOREIGN_TRANSFERS", { c, v in
            setBool(&c.trustForeignTransfers, v)
        }),
        ("provisioning", "THING_AGENT_PROVISIONING", { c, v in setBool(&c.provisioning.enabled, v) }),
        ("homeAssistant", "THING_AGENT_HOME_ASSISTANT", { c, v in c.homeAssistant.apply(v) }),
        ("serviceUsers", "THING_AGENT_SERVICE_USERS", { c, v in
            guard let names = stringList(v), names.allSatisfy({ DeviceID.isValid($0) }) else { return false }
            c.provisioning.serviceUsers = names
            return true
        }),
        ("agentGroup", "THING_AGENT_GROUP", { c, v in
            if v.isNull || v.stringValue == "" {
                c.group.name = nil
                return true
            }
            guard let name = v.stringValue, Group.isValidName(name) else { return false }
            c.group.name = name
            return true
        }),
        ("failoverTimeout", "THING_AGENT_FAILOVER_TIMEOUT", { c, v in
            guard let d = v.doubleValue, d >= 1, d <= 600 else { return false }
            c.group.failoverTimeout = .milliseconds(Int64((d * 1000).rounded()))
            return true
        }),
        ("detailConfig", "THING_AGENT_DETAIL_CONFIG", { c, v in setOptional(&c.detailConfig, v) }),
        ("logLevel", "THING_AGENT_LOG_LEVEL", { c, v in
            guard let level = v.stringValue.flatMap(AgentLogger.Level.init(name:)) else { return false }
            c.logLevel = level
            return true
        }),
        ("logFormat", "THING_AGENT_LOG_FORMAT", { c, v in
            guard let format = v.stringValue.flatMap(LogFormat.init(rawValue:)) else { return false }
            c.logFormat = format
            return true
        }),
    ]

    /// Every key of the config file with the environment variable that sets it (the man page lists them).
    public static var environmentVariables: [(key: String, variable: String)] { keys.map { ($0.key, $0.env) } }

    /// Applies a JSON config file. Unknown keys and wrong types are errors that name the key.
    public mutating func apply(file path: String) throws(Error) {
        try apply(contents: try ConfigFile.bytes(path, .agentConfig), file: path)
    }

    /// Applies the text of a JSON config file (`file` names it in errors).
    mutating func apply(contents: [UInt8], file path: String) throws(Error) {
        let root = try ConfigFile.json(contents, .agentConfig, source: path)
        guard let object = root.objectValue else { throw Error(.agentConfig, source: path, "not a JSON object") }
        for (key, value) in object {
            guard let entry = Self.keys.first(where: { $0.key == key }) else {
                throw Error(.agentConfig, source: path, key: key, "unknown key")
            }
            guard entry.apply(&self, value) else {
                throw Error(.agentConfig, source: path, key: key, "invalid value \(value.serialized())")
            }
        }
    }

    /// Refuses settings that each load but must not go together, once every source (file, environment, flags)
    /// is applied: a foreign transfer's `finish` moves a gateway's sub-devices, and with provisioning the broker
    /// access of those sub-devices goes with them, so trusting a finish no one here started would hand the broker
    /// topics of one gateway's devices to another on that gateway's word alone.
    public func checkCombinations() throws(Error) {
        if homeAssistant.enabled {
            let ha = homeAssistant
            for (name, other) in [("eventsTopic", events.topic), ("replyPrefix", api.replyPrefix),
                                  ("topicRoot", topicRoot), ("the agent's status", announceTopic)]
            where Self.overlaps(ha.topic, other) || Self.overlaps(ha.discoveryPrefix, other) {
                throw Error(.setting, "homeAssistant's topics (\(ha.topic), \(ha.discoveryPrefix)) must not overlap "
                            + "\(name) (\(other))")
            }
            if Self.overlaps(ha.topic, ha.discoveryPrefix) {
                throw Error(.setting, "homeAssistant's topic and discoveryPrefix must not overlap")
            }
        }
        if trustForeignTransfers && provisioning.enabled {
            throw Error(.setting, "trustForeignTransfers and provisioning cannot both be on: with provisioning a "
                        + "finished replacement also moves the sub-devices' broker access, so only a transfer "
                        + "started through this agent may move them (set trustForeignTransfers to false)")
        }
        if group.name != nil && homeAssistant.enabled {
            throw Error(.setting, key: "agentGroup", "agentGroup and homeAssistant cannot both be on yet: Home "
                        + "Assistant's discovery, states and commands are kept by one agent alone (turn homeAssistant "
                        + "off, or run one agent without agentGroup)")
        }
        if group.name != nil && provisioning.enabled {
            throw Error(.setting, key: "agentGroup", "agentGroup and provisioning cannot both be on: pairings, "
                        + "activations and the broker's access are kept by one agent alone (turn provisioning off, or "
                        + "run one agent without agentGroup)")
        }
    }

    /// Whether one topic prefix lies under the other (or is it).
    static func overlaps(_ a: String, _ b: String) -> Bool {
        let a = a.hasSuffix("/") ? String(a.dropLast()) : a, b = b.hasSuffix("/") ? String(b.dropLast()) : b
        return a == b || a.hasPrefix(b + "/") || b.hasPrefix(a + "/")
    }

    /// Applies `THING_AGENT_*` environment variables.
    public mutating func apply(environment: [String: String]) throws(Error) {
        for entry in Self.keys {
            guard let text = environment[entry.env] else { continue }
            try apply(key: entry.key, text: text, source: entry.env)
        }
    }

    /// Applies one setting given as text (an environment variable or a flag): numbers and booleans are parsed.
    public mutating func apply(key: String, text: String, source: String) throws(Error) {
        guard let entry = Self.keys.first(where: { $0.key == key }) else {
            throw Error(.setting, source: source, "unknown setting '\(key)'")
        }
        let value: JSONValue = switch text {
        case "true", "on", "yes": .bool(true)
        case "false", "off", "no": .bool(false)
        default: Int64(text).map(JSONValue.integer) ?? Double(text).map(JSONValue.double) ?? .string(text)
        }
        // Strings that look like numbers (a client id "42") still work for string settings.
        if !entry.apply(&self, value), !entry.apply(&self, .string(text)) {
            throw Error(.setting, source: source, key: key, "invalid value '\(text)'")
        }
    }

    /// A list of strings: in the file a JSON list, in the environment and flags comma-separated (`trimming`: with
    /// the spaces around the commas dropped); nil when it is neither.
    private static func stringList(_ value: JSONValue, trimming: Bool = false) -> [String]? {
        if let list = value.arrayValue {
            let texts = list.compactMap(\.stringValue)
            return texts.count == list.count ? texts : nil
        }
        return value.stringValue.map { text in
            text.split(separator: ",").map { trimming ? $0.trimmingBlanks() : String($0) }
        }
    }

    private static func set(_ target: inout String, _ value: JSONValue) -> Bool {
        guard let s = value.stringValue, !s.isEmpty else { return false }
        target = s
        return true
    }

    private static func setOptional(_ target: inout String?, _ value: JSONValue) -> Bool {
        if value.isNull {
            target = nil
            return true
        }
        guard let s = value.stringValue else { return false }
        target = s.isEmpty ? nil : s
        return true
    }

    private static func setBool(_ target: inout Bool, _ value: JSONValue) -> Bool {
        guard let b = value.boolValue else { return false }
        target = b
        return true
    }

    /// Seconds: zero or more, at most `InputBounds.maxSeconds` (a larger one would trap where it becomes a
    /// `Duration`).
    /// Seconds in the file, the environment and flags; a `Duration` in the configuration.
    private static func setDuration(_ target: inout Duration, _ value: JSONValue) -> Bool {
        guard let d = value.doubleValue.flatMap({ InputBounds.seconds($0, allowZero: true) }) else { return false }
        target = .seconds(d)
        return true
    }

    private static func setNumber(_ target: inout Double, _ value: JSONValue) -> Bool {
        guard let d = value.doubleValue.flatMap({ InputBounds.seconds($0, allowZero: true) }) else { return false }
        target = d
        return true
    }

    /// A whole number from 1 to `max`.
    private static func setCount(_ target: inout Int, _ value: JSONValue, max: Int64) -> Bool {
        guard let n = value.int64Value, n > 0, n <= max else { return false }
        target = Int(n)
        return true
    }

    /// The largest page of the API's `devices`, whatever `apiPageSize` or a request's `limit` says.
    public static let maxPageSize: Int64 = 10_000
}
