import JSON

/// The agent's own wire protocol (docs/protocol.md): `R/D/thing/...`, its topics declared in `NativeTopics.all`.
package struct NativeDialect: Dialect {
    package let topics: Topics
    private let decoder = PayloadDecoder()

    package init(topics: Topics) {
        self.topics = topics
    }

    package var name: String { "native" }
    package var subscriptions: [(filter: String, qos: Int)] { topics.subscriptions }
    package var trafficMeansOnline: Bool { false }

    package func route(_ topic: String) throws(Topics.ParseError) -> DialectRoute? {
        do {
            let (device, kind) = try topics.parse(topic)
            return DialectRoute(device: device, kind: kind)
        } catch .notAThingTopic {
            return nil
        }
    }

    /// The platform owes a native device no answer.
    package func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage {
        DialectMessage(try decoder.decode(route.kind, payload: payload, arrival: arrival))
    }

    /// Native devices announce their own status (and a will).
    package func device(forClient client: String, user: String?) -> String? { nil }

    /// Native devices say everything themselves (`info`).
    package func identity(of device: String) -> JSONObject? { nil }

    /// Every id: `Dialects` asks the native dialect last.
    package func addresses(_ device: String) -> Bool { true }

    /// `{"msgId","time","data"}` on `R/D/thing/<request>`.
    package func request(_ kind: RequestKind, device: String, msgId: String, data: JSONValue?, time: Millis)
        -> OutboundMessage? {
        var payload = JSONObject([("msgId", .string(msgId)), ("time", .integer(time))])
        if let data { payload["data"] = data }
        return OutboundMessage(topic: topics.request(kind, device: device),
                               payload: JSONValue.object(payload).serializedBytes(), qos: 1)
    }
}
