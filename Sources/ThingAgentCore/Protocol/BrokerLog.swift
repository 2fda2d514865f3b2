import JSON

/// mosquitto's own client events, which it publishes on `$SYS/broker/log/N` with `log_dest topic`
/// (deploy/mosquitto.conf): "New client connected from ADDRESS as CLIENT (p2, c1, k60, u'USER')." and "Client
/// CLIENT disconnected." (or closed its connection, timed out, or a socket error). For devices that announce no status
/// (Alink's), a connection is evidence that they are online and its end that they are offline. A dialect says which
/// device a client is (`Dialect.device(forClient:user:)`); other lines are counted as unchanged.
package struct BrokerLog: Dialect {
    package static let topic = "$SYS/broker/log/N"
    /// The dialects whose devices the events are about.
    let dialects: [any Dialect]

    package init(dialects: [any Dialect]) {
        self.dialects = dialects
    }

    package var name: String { "broker-log" }
    package var subscriptions: [(filter: String, qos: Int)] { [(Self.topic, 0)] }
    package var trafficMeansOnline: Bool { false }

    package func route(_ topic: String) throws(Topics.ParseError) -> DialectRoute? {
        topic == Self.topic ? DialectRoute(device: "", kind: .status) : nil
    }

    package func decode(_ route: DialectRoute, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError)
        -> DialectMessage {
        let line = String(decoding: payload, as: UTF8.self)
        guard let event = Self.event(line) else { return DialectMessage(.answeredOnly) }
        for dialect in dialects {
            if let device = dialect.device(forClient: event.client, user: event.user), DeviceID.isValid(device) {
                let status = DeviceMessage(device, .status(online: event.connected, time: arrival, via: .broker))
                // A device first heard of here gets what its id says of it (its product), as one first heard from
                // itself does: its own messages that follow find it known already.
                guard event.connected, let identity = dialect.identity(of: device) else {
                    return DialectMessage(.batch([status]))
                }
                return DialectMessage(.batch([DeviceMessage(device, .info(identity, time: arrival)), status]))
            }
        }
        return DialectMessage(.answeredOnly)
    }

    /// The client a log line is about, its user where the line names one, and whether it connected or left.
    package static func event(_ line: String) -> (client: String, user: String?, connected: Bool)? {
        // "1796171600: New client connected from 127.0.0.1:40110 as CLIENT (p2, c1, k60, u'USER')."
        let text = line.drop { $0 != " " }.dropFirst()
        if text.hasPrefix("New client connected from "), let asRange = text.firstRange(of: " as "),
           let details = text.ranges(of: " (p").last, asRange.upperBound < details.lowerBound {
            let client = String(text[asRange.upperBound..<details.lowerBound])
            let tail = text[details.lowerBound...]
            let user = tail.firstRange(of: "u'").flatMap { start in
                tail[start.upperBound...].firstIndex(of: "'").map { String(tail[start.upperBound..<$0]) }
            }
            return (client, user, true)
        }
        for (prefix, suffix) in [("Client ", " disconnected."), ("Client ", " closed its connection."),
                                 ("Client ", " has exceeded timeout, disconnecting."),
                                 ("Socket error on client ", ", disconnecting.")] {
            if text.hasPrefix(prefix), text.hasSuffix(suffix), text.count > prefix.count + suffix.count {
                return (String(text.dropFirst(prefix.count).dropLast(suffix.count)), nil, false)
            }
        }
        if text.hasPrefix("Client "), let due = text.firstRange(of: " disconnected due to ") {
            return (String(text[text.index(text.startIndex, offsetBy: 7)..<due.lowerBound]), nil, false)
        }
        return nil
    }

    package func identity(of device: String) -> JSONObject? { nil }
    package func device(forClient client: String, user: String?) -> String? { nil }
    package func addresses(_ device: String) -> Bool { false }
    package func request(_ kind: RequestKind, device: String, msgId: String, data: JSONValue?, time: Millis)
        -> OutboundMessage? { nil }
}
