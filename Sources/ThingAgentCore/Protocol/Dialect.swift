import JSON

/// A message the agent publishes through a dialect: a request to a device, or an answer the platform owes one.
package struct OutboundMessage: Sendable, Equatable {
    package var topic: String
    package var payload: [UInt8]
    package var qos: Int
    /// False for a request the device never answers (an Alink upgrade push): once the broker has it, it counts
    /// as accepted, and what follows (progress, the new version) tells the rest.
    package var answered: Bool

    package init(topic: String, payload: [UInt8], qos: Int, answered: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.answered = answered
    }
}

/// What a dialect made of one message: the message the receive path knows, and the answers the platform owes
/// the device for it (sent once the message is kept; none for most dialects and messages).
package struct DialectMessage: Sendable {
    package var message: InboundMessage
    package var replies: [OutboundMessage]

    package init(_ message: InboundMessage, replies: [OutboundMessage] = []) {
        self.message = message
        self.replies = replies
    }
}

/// Where one of a dialect's topics leads: the device it is about, what it carries in the agent's own terms, and
/// the dialect's own detail (which of its topics) for `decode`.
package struct DialectRoute: Sendable, Equatable {
    package var device: String
    package var kind: InboundKind
    package var detail: Int
    /// A name the topic carries (an Alink event's identifier); nil for most topics.
    package var name: String?
    /// The topic itself, for a dialect whose answers go out on a topic made from it (Alink's `_reply`).
    package var topic: String

    package init(device: String, kind: InboundKind, detail: Int = 0, name: String? = nil, topic: String = "") {
        self.device = device
        self.kind = kind
        self.detail = detail
        self.name = name
        self.topic = topic
    }
}

/// One wire protocol: the topics it subscribes, how an inbound message becomes one the receive path knows, how
/// each request is encoded, and the answers the platform owes a device. Several run at once on one broker
/// (config `dialects`); docs/protocol.md has one section per dialect.
///
/// Every method is pure (no I/O, no clock but the arrival passed in) and runs on the receive path, before the
/// broker gets its PUBACK: keep them short.
package protocol Dialect: Sendable {
    /// Its name in config `dialects`: `native`, `alink`.
    var name: String { get }
    /// The filters the agent subscribes to, with their QoS.
    var subscriptions: [(filter: String, qos: Int)] { get }
    /// The route of `topic`: nil when the topic is not this dialect's; `.invalidDeviceID` when it is, but names a
    /// device id outside docs/protocol.md's rule.
    func route(_ topic: String) throws(Topics.ParseError) -> DialectRoute?
    /// The message a payload on `route` carries, with the answers the platform owes the device for it (from the
    /// same parse: the payload is read once).
    func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage
    /// Whether a message of this dialect is itself evidence that the device is online (its devices announce no
    /// status of their own).
    var trafficMeansOnline: Bool { get }
    /// What the wire says of a device by its id alone, recorded in its information when it is first heard
    /// (an Alink device's `productId` is its product key); nil for none.
    func identity(of device: String) -> JSONObject?
    /// The device a broker client is (`BrokerLog`), by its client id or user name; nil when it is not one of this
    /// dialect's devices, or its devices announce their own status.
    func device(forClient client: String, user: String?) -> String?
    /// Whether requests to `device` go out in this dialect (decided by the form of its id).
    func addresses(_ device: String) -> Bool
    /// `kind` to `device` with `msgId`; nil when the dialect has no such request.
    func request(_ kind: RequestKind, device: String, msgId: String, data: JSONValue?, time: Millis)
        -> OutboundMessage?
    /// The answer to a device's `.query`, from what the agent knows; nil when the dialect asks no such question.
    func answer(_ query: DeviceQuery, device: String, with answer: QueryAnswer) -> OutboundMessage?
    /// Why `kind` must not be sent to `device` of `productId` (the product the cache knows, nil for none), before
    /// anything is published; nil when it may.
    func refusal(_ kind: RequestKind, device: String, productId: String?) -> String?
    /// The largest message its devices take (nil: no limit but the broker's); a longer request is refused.
    var maxDownlinkBytes: Int? { get }
}

extension Dialect {
    package func answer(_ query: DeviceQuery, device: String, with answer: QueryAnswer) -> OutboundMessage? { nil }
    package func refusal(_ kind: RequestKind, device: String, productId: String?) -> String? { nil }
    package var maxDownlinkBytes: Int? { nil }
}

/// The dialects the agent speaks. A topic is tried on the native dialect first, so that its messages pay for
/// nothing else; a request goes out in the first other dialect that addresses the device's id, else the native one.
package struct Dialects: Sendable {
    package let native: NativeDialect?
    package let others: [any Dialect]

    package init(native: NativeDialect?, others: [any Dialect] = []) {
        self.native = native
        self.others = others
    }

    /// The dialects beside the native one, by their name in config `dialects`: one table, so that a name the
    /// config takes always makes its dialect.
    private static let vendors: [String: @Sendable (_ products: [String: String]) -> any Dialect] = [
        "alink": { _ in AlinkDialect() },
        TuyaLinkDialect.name: { TuyaLinkDialect(products: $0) },
    ]

    /// The names config `dialects` takes.
    package static let names = ["native"] + vendors.keys.sorted()

    /// The dialects `names` names (unknown names are left out), the native one on `topics`; `products` the
    /// products of devices whose wire never names them (config `deviceProducts`).
    package init(names: [String], topics: Topics, products: [String: String] = [:]) {
        native = names.contains("native") ? NativeDialect(topics: topics) : nil
        let spoken = names.compactMap { Self.vendors[$0]?(products) }
        // Devices that announce no status of their own are also followed by the broker's client events.
        others = spoken + (spoken.contains { $0.trafficMeansOnline } ? [BrokerLog(dialects: spoken)] : [])
    }

    package var all: [any Dialect] { (native.map { [$0] } ?? []) + others }

    package var subscriptions: [(filter: String, qos: Int)] { all.flatMap(\.subscriptions) }

    /// The dialect whose topic this is, with its route; `.notAThingTopic` when none has it.
    package func route(_ topic: String) throws(Topics.ParseError) -> (dialect: any Dialect, route: DialectRoute) {
        if let native, let route = try native.route(topic) { return (native, route) }
        for dialect in others {
            if let route = try dialect.route(topic) { return (dialect, route) }
        }
        throw .notAThingTopic
    }

    /// The dialect requests to `device` go out in; nil when none addresses it. `known`, the dialect the cache
    /// recorded for it (`info.dialect`), decides first; `productId`, the product the cache knows for it, tells a
    /// native device whose id merely looks like another dialect's (`my.lamp` of product `p-light-1` is no Alink
    /// device of product key `my`) from one of that dialect.
    package func dialect(for device: String, known: String? = nil, productId: String? = nil) -> (any Dialect)? {
        if let known { return all.first { $0.name == known } }
        return others.first { dialect in
            guard dialect.addresses(device) else { return false }
            guard let productId, let claimed = dialect.identity(of: device)?["productId"]?.stringValue else {
                return true
            }
            return claimed == productId
        } ?? native
    }
}
