import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Device events (a button press, a fault) in every dialect: decoded, kept (the latest of each name), heard by
/// listeners and the feed, and kept across a restart; tags and how presence is known.
@Suite("Device events, tags and presence")
struct DeviceEventTests {
    let arrival: Millis = 1_700_000_000_000

    func native(_ suffix: String, _ payload: String) throws -> InboundMessage {
        let dialect = NativeDialect(topics: Topics())
        let route = try #require(try dialect.route("things/btn1/thing/\(suffix)"))
        return try Array(payload.utf8).withUnsafeBytes { try dialect.decode(route, payload: $0, arrival: arrival) }.message
    }

    @Test func aNativeEventIsItsCodeParametersAndTime() throws {
        let event = try native("event/trigger",
            #"{"msgId":"9","time":1699999999000,"data":{"eventCode":"pressed","eventTime":1699999998000,"outputParams":{"count":2}}}"#)
        #expect(event == .event(ThingEvent(name: "pressed", params: .object(["count": 2]), time: 1_699_999_998_000)))
        let plain = try native("event/trigger", #"{"data":{"eventCode":"fault"}}"#)
        #expect(plain == .event(ThingEvent(name: "fault", params: .object([:]), time: arrival)), "no time: the arrival")
        for bad in [#"{"data":{}}"#, #"{"data":{"eventCode":"a b"}}"#, #"{"data":{"eventCode":"x","outputParams":[1]}}"#,
                    #"{"eventCode":"x"}"#] {
            #expect(throws: PayloadError.self, "\(bad)") { try native("event/trigger", bad) }
        }
    }

    @Test func theLatestOfEachNameIsKeptAndARepeatOrAnOlderOneIsNotHeard() throws {
        var device = DeviceSnapshot(id: "btn1", seenAt: arrival)
        let first = ThingEvent(name: "pressed", params: .object(["count": 1]), time: 100)
        #expect(try device.apply(.event(first), now: arrival).events == [first])
        #expect(try device.apply(.event(first), now: arrival).isEmpty, "a redelivery is not a second press")
        let older = ThingEvent(name: "pressed", params: .object(["count": 0]), time: 50)
        #expect(try device.apply(.event(older), now: arrival).isEmpty)
        let same = ThingEvent(name: "pressed", params: .object(["count": 2]), time: 100)
        #expect(try device.apply(.event(same), now: arrival).events == [same], "another press in the same ms")
        let fault = ThingEvent(name: "fault", params: .object([:]), time: 90)
        #expect(try device.apply(.event(fault), now: arrival).events == [fault], "names are kept apart")
        #expect(device.events == ["pressed": same, "fault": fault])
        let heard = AppliedChanges(events: [fault]).events(for: device)
        #expect(heard == [.eventReported(deviceId: "btn1", event: fault)])
    }

    @Test func tagsAreSetAndRemovedOneByOne() throws {
        var device = DeviceSnapshot(id: "a1PK.lamp1", seenAt: arrival)
        _ = try device.apply(.tags(update: [("room", "lab"), ("rack", "3")], delete: [], time: 10), now: arrival)
        #expect(device.info["tags"] == .object(["room": "lab", "rack": "3"]))
        let changes = try device.apply(.tags(update: [], delete: ["rack"], time: 11), now: arrival)
        #expect(changes.info && device.info["tags"] == .object(["room": "lab"]))
        _ = try device.apply(.tags(update: [], delete: ["room"], time: 12), now: arrival)
        #expect(device.info["tags"] == nil, "no tags left: none")
    }

    @Test func theStatusSaysHowItIsKnown() throws {
        var device = DeviceSnapshot(id: "a1PK.lamp1", seenAt: arrival)
        _ = try device.apply(.status(online: true, time: 10, via: .traffic), now: arrival)
        #expect(device.presence == .traffic)
        _ = try device.apply(.status(online: false, time: 20, via: .broker), now: arrival)
        #expect(device.presence == .broker && device.online == false)
        _ = try device.apply(.status(online: true, time: 15, via: .session), now: arrival)
        #expect(device.presence == .broker, "older evidence loses")
        #expect(device.json(now: arrival)["presence"] == "broker")
    }

    /// A native device's event on a real broker: the listener and the feed hear it, `info` has the latest of its
    /// name, and a restarted agent still has it, from the cache file.
    @Test(.timeLimit(.minutes(2)))
    func anEventReachesListenersTheFeedAndTheCacheAndOutlivesARestart() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let feed = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/btn1/event")
            try await withAgent(broker, directory: directory, configure: { $0.events.publish = true }) { agent in
                let heard = Task { () -> DeviceEvent? in
                    for await event in agent.events.events(device: "btn1", kinds: .events) { return event }
                    return nil
                }
                try await Task.sleep(for: .milliseconds(100))
                let device = try SimulatedDevice("btn1", brokerURL: broker.url)
                try await device.connect()
                try await device.publish("event/trigger",
                    #"{"msgId":"1","time":\#(t0),"data":{"eventCode":"pressed","outputParams":{"count":2}}}"#)
                let event = ThingEvent(name: "pressed", params: .object(["count": 2]), time: t0)
                #expect(await heard.value == .eventReported(deviceId: "btn1", event: event))
                let published = try await feed.waitFor(count: 1, timeout: .seconds(10))
                let json = try JSONParser.parse(try #require(published.first).payload)
                #expect(json["event"] == "event" && json["data"]?["name"] == "pressed" && json["data"]?["params"]?["count"] == 2)
                #expect(agent.cache.device("btn1")?.events["pressed"] == event)
                await device.client.disconnect()
            }
            await feed.stop()
            try await withAgent(broker, directory: directory) { agent in
                #expect(agent.cache.device("btn1")?.events["pressed"]?.params == .object(["count": 2]))
                let stored = try CacheStore(path: directory + "/cache.sqlite", readOnly: true).loadDevice("btn1")
                #expect(stored?.events["pressed"]?.time == t0, "the CLI's read of the file has it too")
            }
        }
    }
}
