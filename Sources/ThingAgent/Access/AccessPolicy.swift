import ThingAgentCore
/// One ACL of a dynamic-security role.
struct RoleACL: Hashable, Sendable, Comparable {
    /// `publishClientSend`, `publishClientReceive`, `subscribePattern`.
    let type: String
    let topic: String
    var allow = true
    /// Higher is checked first: a deny above the allows it carves out of.
    var priority = 0

    static func send(_ topic: String) -> RoleACL { RoleACL(type: "publishClientSend", topic: topic) }
    static func subscribe(_ topic: String) -> RoleACL { RoleACL(type: "subscribePattern", topic: topic) }
    static func denyReceive(_ topic: String) -> RoleACL {
        RoleACL(type: "publishClientReceive", topic: topic, allow: false, priority: 10)
    }
    static func denySend(_ topic: String) -> RoleACL {
        RoleACL(type: "publishClientSend", topic: topic, allow: false, priority: 10)
    }

    static func < (lhs: RoleACL, rhs: RoleACL) -> Bool { (lhs.type, lhs.topic) < (rhs.type, rhs.topic) }
}

/// Who may do what at the broker when provisioning is on: the roles computed from the fleet. Pure: the access
/// manager sends what differs from the broker's. Every topic is literal or uses `+` for any device: the plugin
/// substitutes neither `%u` nor `%c` (mosquitto 2.0.11), so each device gets a role naming its own id.
struct AccessPolicy: Sendable {
    let topics: Topics
    /// The agent's client id (its API lives under `thing-agent/api/<clientId>/`).
    let agentClientID: String
    let eventsTopic: String
    let replyPrefix: String
    /// `homeAssistant.discoveryPrefix` when the feature is on (or was: the daemon takes back what it published).
    var homeAssistantPrefix: String?

    static let agentRole = "thing-agent"
    static let cliRole = "thing-agent-cli"
    static let cliUser = "thing-agent-cli"
    static let serviceRole = "thing-agent-service"
    /// Made at every start but given to no one: the operator gives it to a service that should also write
    /// (`mosquitto_ctrl dynsec addClientRole USER thing-agent-service-control`).
    static let serviceControlRole = "thing-agent-service-control"
    /// The API methods that only read: all a service gets by default (`sceneList` and `linkList` list what
    /// `scenes` and `links`, which also change them, list).
    static let readMethods = ["info", "devices", "gateways", "pairings", "health", "firmware", "sceneList", "linkList"]
    static let devicePrefix = "device-"
    static let pairingPrefix = "pairing-"

    static func deviceRole(_ device: String) -> String { devicePrefix + device }
    static func pairingRole(_ username: String) -> String { pairingPrefix + username }
    /// A service's own role: its replies, under its user name.
    static func serviceReplies(_ user: String) -> String { "service-" + user }

    private var root: String { topics.root }

    /// The dialect names a pairing may be for (`Pairing.dialect`): `alink`; nil is the native one. Not TuyaLink:
    /// its devices sign their own login, which the broker cannot check (docs/protocol.md, "TuyaLink").
    static let pairingDialects = Dialects.names.filter { $0 != "native" && $0 != TuyaLinkDialect.name }

    /// The broker user a provisioned device connects as: its id, or an Alink device's Linkkit user name
    /// `<deviceName>&<productKey>`.
    static func brokerUser(_ device: String, dialect: String?) -> String {
        dialect == "alink" ? AlinkTopics.username(device) ?? device : device
    }

    /// The client id its credentials are pinned to: its user name, or an Alink device's Linkkit client id
    /// (`AlinkTopics.clientID`).
    static func brokerClientID(_ device: String, dialect: String?) -> String {
        dialect == "alink" ? AlinkTopics.clientID(device) ?? device : device
    }

    /// What a device publishes (reports, answers) and reads (the requests addressed to it), for its id alone. An
    /// Alink device's (`dialect` "alink"): its own Alink topics (`AlinkTopics`), a gateway's (`gateway`) with its
    /// topology and sessions; each names its product key and name literally, `+` only for an event's or a
    /// service's identifier.
    func deviceTopics(_ device: String, dialect: String? = nil, gateway: Bool = false) -> Set<RoleACL> {
        if dialect == "alink" {
            return Set(AlinkTopics.filters(of: device, gateway: gateway, publisher: .device).map(RoleACL.send))
                .union(AlinkTopics.filters(of: device, gateway: gateway, publisher: .agent).map(RoleACL.subscribe))
        }
        return Set(NativeTopics.all.map { topic in
            let name = topics.topic(topic, device: device)
            return topic.publisher == .device ? .send(name) : .subscribe(name)
        })
    }

    /// A pairing's two topics: the request its holder publishes, the answer it reads.
    func pairingTopics(_ username: String) -> Set<RoleACL> {
        [.send(topics.activate(username)), .subscribe(topics.activateResponse(username))]
    }

    /// A device's role: its own topics, a gateway's sub-devices' too, and the pairings it activates sub-devices with.
    /// `dialects` names the dialect of each device that is not native (an Alink gateway and its sub-devices);
    /// an Alink device that is a gateway (`gateway`, or one with sub-devices or pairings) also gets its topology
    /// and session topics.
    func deviceRole(_ device: String, subDevices: [String], pairings: [String], dialects: [String: String] = [:],
                    gateway: Bool = false) -> Set<RoleACL> {
        let isGateway = gateway || !subDevices.isEmpty || !pairings.isEmpty
        var acls = deviceTopics(device, dialect: dialects[device], gateway: isGateway)
        for sub in subDevices { acls.formUnion(deviceTopics(sub, dialect: dialects[sub])) }
        for pairing in pairings { acls.formUnion(pairingTopics(pairing)) }
        return acls
    }

    /// What the agent publishes to Alink devices (property sets, service calls, upgrade pushes, and the answers a
    /// post, a topology or session message and an NTP request are owed) and what it reads of them, the broker's
    /// client events included. The operators' CLI (`daemon` false) reads the same and sends sets and service calls:
    /// the answers are the daemon's alone, and so are upgrades (`ota` asks the daemon), as in the static ACL.
    private func alinkAgentTopics(daemon: Bool) -> Set<RoleACL> {
        let sent = AlinkTopics.everyDevice(.agent).filter { filter in
            daemon || filter.hasSuffix("/service/+") || filter.hasSuffix("/service/property/set")
        }
        let read = AlinkDialect().subscriptions.map(\.filter) + [BrokerLog.topic]
        return Set(sent.map(RoleACL.send) + read.map(RoleACL.subscribe))
    }

    /// What the agent publishes to TuyaLink devices (property sets, actions, firmware issues, and the answers their
    /// messages are owed) and what it reads of them (`TuyaLinkTopics`). The operators' CLI (`daemon` false) reads the
    /// same and sends sets and actions only, as in the static ACL.
    private func tuyaLinkAgentTopics(daemon: Bool) -> Set<RoleACL> {
        let sent = TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .agent).filter { filter in
            daemon || filter.hasSuffix("/thing/property/set") || filter.hasSuffix("/thing/action/execute")
        }
        let read = TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .device)
        return Set(sent.map(RoleACL.send) + read.map(RoleACL.subscribe))
    }

    /// Requests, removals and the clearing of retained topics, which the agent and the operators' CLI send.
    private var requestTopics: Set<RoleACL> {
        // Every topic the agent publishes to devices, and status and info, whose retained messages a removal clears.
        let published = NativeTopics.all.filter { $0.publisher == .agent }.map(\.suffix)
        return Set((published + ["thing/status", "thing/info"]).map { .send("\(root)/+/\($0)") })
    }

    /// The agent's own user: the `admin` role of `dynsec init` lets it read everything and administer the plugin;
    /// this one lets it publish what it publishes (on `activate`, only the clearing of a retained request).
    var agentRole: Set<RoleACL> {
        var acls = requestTopics
        acls.formUnion([
            .send("\(root)/+/thing/activate"), .send("\(root)/+/thing/activate_response"), .send("thing-agent/#"),
            .send(eventsTopic + "/#"), .send(replyPrefix + "#"), .subscribe("\(root)/+/thing/#"),
            .subscribe("thing-agent/#"),
        ])
        acls.formUnion(alinkAgentTopics(daemon: true))
        acls.formUnion(tuyaLinkAgentTopics(daemon: true))
        // Home Assistant's discovery configs (its own states and commands are under thing-agent/).
        if let homeAssistantPrefix { acls.insert(.send(homeAssistantPrefix + "/#")) }
        return acls
    }

    /// The operators' CLI: follows every device, sends requests and removals, asks the daemon's API; never reads
    /// an activation (its token) or its answer (a device's credentials).
    var cliRole: Set<RoleACL> {
        var acls = requestTopics
        acls.formUnion([
            .subscribe("\(root)/+/thing/#"), .subscribe("thing-agent/agents/+/status"),
            .subscribe(replyPrefix + Self.cliUser + "/#"), .send("thing-agent/api/\(agentClientID)/request/#"),
            // transfer follows the daemon's event feed for the stages of a replacement.
            .subscribe(eventsTopic + "/#"),
            .denyReceive("\(root)/+/thing/activate"), .denyReceive("\(root)/+/thing/activate_response"),
        ])
        acls.formUnion(alinkAgentTopics(daemon: false))
        acls.formUnion(tuyaLinkAgentTopics(daemon: false))
        return acls
    }

    /// Every service: the event feed, the agent's announcement, the API's methods that only read.
    var serviceRole: Set<RoleACL> {
        let api = "thing-agent/api/\(agentClientID)/request/"
        return Set(Self.readMethods.map { .send(api + $0) })
            .union([.subscribe(eventsTopic + "/#"), .subscribe("thing-agent/agents/+/status")])
    }

    /// A service that also writes: every API method but `ota` (an upgrade names any image; starting one is the
    /// operators' call).
    var serviceControlRole: Set<RoleACL> {
        let api = "thing-agent/api/\(agentClientID)/request/"
        return [.send(api + "#"), .denySend(api + "ota")]
    }

    func serviceRepliesRole(_ user: String) -> Set<RoleACL> {
        [.subscribe(replyPrefix + user + "/#")]
    }

    /// The commands that turn `current` into `desired` for `role`; removals first, so a topic moving from one
    /// role to another is never allowed twice by one role's change and denied by the other's.
    static func changes(role: String, from current: Set<RoleACL>, to desired: Set<RoleACL>) -> [DynsecCommand] {
        current.subtracting(desired).sorted().map { .removeRoleACL(role, $0) }
            + desired.subtracting(current).sorted().map { .addRoleACL(role, $0) }
    }
}
