import JSON
import MQTT
import Synchronization
import ThingAgentCore

/// Publishes what listeners see as JSON on `<eventsTopic>/<D>/<kind>` (docs/mqtt-api.md, "Events over MQTT").
///
/// An ordinary EventHub listener: its own bounded queue (`eventQueueLimit`), so a slow broker never slows the
/// receive path; when the queue is full events are dropped and counted (`agent.events.dropped`). QoS `eventsQoS`,
/// 1 by default: each event acknowledged by the broker, in order (several in flight at once); QoS 0 never waits
/// for an acknowledgement, for feeds that are only live news.
enum EventPublisher {
    /// The topic level naming each kind of event.
    static let kindNames: [(kind: DeviceEventKinds, name: String)] = [
        (.properties, "properties"), (.status, "status"), (.signal, "signal"), (.info, "info"),
        (.transfer, "transfer"), (.offlineWarning, "offline"), (.backOnline, "online"), (.ota, "ota"),
        (.link, "link"), (.activated, "activated"), (.events, "event"), (.commands, "command"),
    ]

    static func kindName(_ event: DeviceEvent) -> String {
        let kind = event.kind
        return kindNames.first { $0.kind == kind }!.name
    }

    /// The event as published: `{"devId","event","time",...}` with the kind's own fields.
    static func payload(_ event: DeviceEvent, now: Millis) -> JSONObject {
        var object = JSONObject([
            ("devId", .string(event.deviceId)), ("event", .string(kindName(event))), ("time", .integer(now)),
        ])
        switch event {
        case .propertiesChanged(_, let changes):
            var data = JSONObject()
            for change in changes {
                data[change.code] = .object(JSONObject([
                    ("value", change.value), ("time", .integer(change.time)), ("previous", change.previous ?? .null),
                ]))
            }
            object["data"] = .object(data)
        case .statusChanged(_, let online, let time):
            object["status"] = .string(online ? "online" : "offline")
            object["online"] = .bool(online)
            object["statusTime"] = .integer(time)
        case .signalUpdated(_, let wifi, let rsrp):
            if let wifi {
                object["wifiSignal"] = .integer(Int64(wifi.dBm))
                object["wifiSignalTime"] = .integer(wifi.time)
            }
            if let rsrp {
                object["rsrp"] = .integer(Int64(rsrp.dBm))
                object["rsrpTime"] = .integer(rsrp.time)
            }
        case .infoChanged(_, let info):
            object["data"] = .object(info.json)
        case .transferStatusChanged(_, let info):
            object["data"] = .object(info.json)
        case .offlineWarning(_, let since):
            object["offlineSince"] = .integer(since)
        case .backOnline(_, let since, let away):
            object["offlineSince"] = .integer(since)
            object["awayMs"] = .integer(away)
        case .upgradeChanged(_, let upgrade):
            object["data"] = .object(upgrade.json)
        case .linkPropagated(_, let propagation):
            object["data"] = .object(propagation.json)
        case .activated(_, let pairing, let gateway):
            object["pairing"] = .string(pairing)
            object["gatewayId"] = gateway.map(JSONValue.string) ?? .null
        case .eventReported(_, let event):
            object["data"] = .object(event.json)
        case .commandRefused(_, let refusal):
            object["data"] = .object(refusal.json)
        }
        return object
    }

    /// At most this many events go to the library at once (one hold of the client's lock): the rest of a larger
    /// batch follows once these are acknowledged.
    static let batchLimit = 128

    /// Publishes every event of `stream` until it ends (the agent stops) or the task is cancelled. What the queue
    /// holds goes out together (up to `batchLimit` at a time, the rest waiting in the bounded queue), in order,
    /// without waiting for one acknowledgement before the next message.
    /// One at a time, each event waited for its acknowledgement, which the broker sends behind the backlog it is
    /// sending the receive path: during a burst the feed published a few hundred events a second and dropped the
    /// rest. QoS 1 is still held to the broker's in-flight limit (its receive maximum) during a burst.
    /// In a group, a standby takes its events off the queue and publishes none (`standing`): the active one
    /// publishes the feed.
    static func run(_ stream: DeviceEventStream, client: MQTTClient, prefix: String, qos: QoS = .atLeastOnce,
                    counters: IntegrationCounters, standing: Standing = Standing(group: nil, instance: "")) async {
        while let events = await stream.nextBatch(atMost: batchLimit) {
            guard standing.isActive else { continue }
            // A stop does not wait for the backlog: under a steady stream the queue never runs dry while the
            // receive path still runs, which only ends after this does (found by the SIGTERM-under-load fault
            // test). What is not sent is counted, so that the metrics account for every event.
            if Task.isCancelled {
                counters.eventsNotSent.add(events.count + stream.discardQueued(), ordering: .relaxed)
                return
            }
            let now = Timestamp.now()
            let messages = events.map { event in
                (topic: "\(prefix)/\(event.deviceId)/\(kindName(event))",
                 payload: JSONValue.object(payload(event, now: now)).serializedBytes())
            }
            let outcomes = await client.publish(inOrder: messages, qos: qos)
            let sent = outcomes.reduce(0) { count, outcome in
                if case .success = outcome { count + 1 } else { count }
            }
            counters.eventsPublished.add(sent, ordering: .relaxed)
            // Not connected, or no acknowledgement before the connection was lost or the stop (docs/protocol.md,
            // "Events across a disconnect": the library may still deliver those later).
            counters.eventsNotSent.add(outcomes.count - sent, ordering: .relaxed)
        }
    }
}

extension CommandRefusal {
    /// `{"source","command","outcome","message","time"}`, as the event feed carries it.
    public var json: JSONObject {
        JSONObject([("source", .string(source)), ("command", .string(command)), ("outcome", .string(outcome)),
                    ("message", .string(message)), ("time", .integer(time))])
    }

    /// A refusal as the event feed carries it (`json`); nil when it is not one.
    public init?(json: JSONValue?) {
        guard let json, let source = json["source"]?.stringValue, let outcome = json["outcome"]?.stringValue else {
            return nil
        }
        self.init(source: source, command: json["command"]?.stringValue ?? "", outcome: outcome,
                  message: json["message"]?.stringValue ?? "", time: json["time"]?.int64Value ?? 0)
    }
}

/// Counters of the MQTT integration (events published, API requests served).
public final class IntegrationCounters: Sendable {
    let eventsPublished = Atomic<Int>(0)
    let eventsNotSent = Atomic<Int>(0)
    let requestsAnswered = Atomic<Int>(0)
    let requestsRejected = Atomic<Int>(0)
    let requestsDropped = Atomic<Int>(0)

    init() {}

    public struct Snapshot: Sendable, Equatable {
        /// Events published on the events topics.
        public var eventsPublished: Int
        /// Events not acknowledged by the broker: taken while not connected, in flight when the connection was lost
        /// (at QoS 1 the library may still deliver those after it reconnects, late, some twice), or held at a stop.
        public var eventsNotSent: Int
        /// API requests answered with code 0.
        public var requestsAnswered: Int
        /// API requests answered with an error code (bad request, unknown device or method).
        public var requestsRejected: Int
        /// API requests without a place to answer, or over the queue's limit.
        public var requestsDropped: Int
    }

    public var snapshot: Snapshot {
        Snapshot(eventsPublished: eventsPublished.load(ordering: .relaxed),
                 eventsNotSent: eventsNotSent.load(ordering: .relaxed),
                 requestsAnswered: requestsAnswered.load(ordering: .relaxed),
                 requestsRejected: requestsRejected.load(ordering: .relaxed),
                 requestsDropped: requestsDropped.load(ordering: .relaxed))
    }
}
