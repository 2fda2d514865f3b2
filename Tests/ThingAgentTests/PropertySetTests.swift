import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `setProperties` through a real broker: the payload on the wire, the answers, and the thing-model checks that
/// keep anything invalid off the broker.
@Suite("Property set against a real broker", .serialized)
struct PropertySetTests {
    static let setTopics = "things/+/thing/properties/set"

    @Test(.timeLimit(.minutes(1)))
    func publishesTheExactPayloadAtQoS1AndReturnsTheAnswer() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                let device = try await CommandFixture.device("bf12ab", broker, agent: agent, productId: "p-light-1")
                let answering = try await device.answer("properties/set") { _ in #""code":0"# }
                let wire = try await TopicRecorder.start(broker.url, filter: Self.setTopics)
                let before = Timestamp.current
                let answer = try await agent.setProperties(
                    deviceId: "bf12ab", ["switch_1": true, "mode": "white", "bright_value": 300])
                #expect(answer.code == 0)

                let message = try #require(try await wire.waitFor(count: 1).first)
                #expect(message.topic == "things/bf12ab/thing/properties/set")
                #expect(message.qos == .atLeastOnce)
                let payload = try JSONParser.parse(message.payload)
                let object = try #require(payload.objectValue)
                #expect(object.keys == ["msgId", "time", "data"])
                #expect(object["msgId"]?.stringValue == answer.msgId)
                let time = try #require(object["time"]?.int64Value)
                #expect(time >= before && time <= Timestamp.current)
                #expect(String(time).count == 13)
                // Codes in sorted order, whatever order the caller's dictionary had.
                #expect(message.text.hasSuffix(#""data":{"bright_value":300,"mode":"white","switch_1":true}}"#))
                answering.cancel()
                await wire.stop()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theCacheChangesOnlyWithTheDevicesNextReport() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                let device = try await CommandFixture.device("bf12ab", broker, agent: agent, productId: "p-light-1")
                try await device.properties(#"{"bright_value":100}"#, time: t0)
                try await waitUntil { agent.cache.device("bf12ab")?.properties["bright_value"]?.value == 100 }
                let answering = try await device.answer("properties/set") { _ in #""code":0"# }
                let control = DeviceControl(deviceId: "bf12ab", agent: agent)
                #expect(control.thingModel?.productId == "p-light-1")
                try await control.setProperties(["bright_value": 300])
                #expect(control.properties["bright_value"]?.value == 100, "a set does not change the cache")
                try await device.properties(#"{"bright_value":300}"#, time: t0 + 1)
                try await waitUntil { control.properties["bright_value"]?.value == 300 }
                answering.cancel()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func refusalCarriesTheDevicesCodeAndMessage() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let device = try await CommandFixture.device("bf12ab", broker, agent: agent)
                let answering = try await device.answer("properties/set") { _ in
                    #""code":1005,"message":"bright_value must be at most 1000""#
                }
                let outcome = await agent.sendPropertySet(deviceId: "bf12ab", ["bright_value": 2000])
                #expect(outcome.result == .failure(.refused(code: 1005, message: "bright_value must be at most 1000")))
                #expect(outcome.code == 1005)
                #expect(outcome.outcome == "refused")
                #expect(outcome.msgId != nil)
                #expect(outcome.error?.description
                        == "refused by the device with code 1005 (value out of range): bright_value must be at most 1000")
                answering.cancel()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func silentDeviceEndsInTimeout() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let device = try await CommandFixture.device("mute", broker, agent: agent)
                await #expect(throws: RequestError.timeout(deviceId: "mute", request: "properties/set", seconds: 0.3)) {
                    try await agent.setProperties(deviceId: "mute", ["switch_1": true], timeout: .milliseconds(300))
                }
                #expect(agent.tracker.inFlight == 0)
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func everyModelRuleRefusesBeforeAnythingIsPublished() async throws {
        try await withBroker { broker in
            // Not the shipped light model alone: its stepped colour_temp and set-only reset are rules to check too.
            try await withAgent(broker, models: [testLightModel()]) { agent in
                let device = try await CommandFixture.device("bf12ab", broker, agent: agent, productId: "p-light-1")
                let answering = try await device.answer("properties/set") { _ in #""code":0"# }
                let wire = try await TopicRecorder.start(broker.url, filter: Self.setTopics)
                let refused: [([String: JSONValue], String)] = [
                    (["switch_2": true], "invalid: switch_2: unknown property for product p-light-1; nothing was sent"),
                    (["switch_1": 1], "switch_1: must be true or false (bool)"),
                    (["bright_value": "300"], "bright_value: must be an integer (value)"),
                    (["bright_value": 300.5], "bright_value: must be an integer (value)"),
                    (["bright_value": 9], "bright_value: 9 is below the minimum 10"),
                    (["bright_value": 1001], "bright_value: 1001 is above the maximum 1000"),
                    (["colour_temp": 15], "colour_temp: 15 is off the step 10 (from 0)"),
                    (["mode": "disco"], "mode: 'disco' is not one of white, colour, scene"),
                    (["label": .string(String(repeating: "é", count: 17))], "label: 34 bytes is longer than maxlen 32"),
                    (["temp_current": 20], "temp_current: read-only (access ro)"),
                    // All or nothing: one bad value keeps the good ones from being sent too.
                    (["switch_1": true, "bright_value": 2000], "bright_value: 2000 is above the maximum 1000"),
                    ([:], "no property to set"),
                    (["": 1], "property code '' is empty or longer than 64 bytes"),
                ]
                for (values, expected) in refused {
                    let outcome = await agent.sendPropertySet(deviceId: "bf12ab", values)
                    #expect(outcome.outcome == "invalid", "\(values)")
                    #expect(outcome.msgId == nil)
                    #expect(outcome.error?.description.contains(expected) == true,
                            "\(values): \(outcome.error?.description ?? "no error")")
                }
                #expect(agent.tracker.inFlight == 0)
                // A valid set as a marker: the broker delivers in order, so anything published before it would
                // have reached the recorder first.
                let marker = try await agent.setProperties(deviceId: "bf12ab", ["reset": true, "colour_temp": 20])
                let seen = try await wire.waitFor(count: 1)
                #expect(seen.count == 1)
                #expect(seen.first.flatMap { SimulatedDevice.msgId(in: $0.text) } == marker.msgId)
                answering.cancel()
                await wire.stop()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aDeviceWithoutAKnownModelIsNotChecked() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                let unknownProduct = try await CommandFixture.device("odd", broker, agent: agent, productId: "p-other")
                let noInfo = try await CommandFixture.device("bare", broker, agent: agent)
                let a = try await unknownProduct.answer("properties/set") { _ in #""code":0"# }
                let b = try await noInfo.answer("properties/set") { _ in #""code":0"# }
                #expect(agent.thingModel(for: "odd") == nil)
                try await agent.setProperties(deviceId: "odd", ["bright_value": 99999, "anything": "goes"])
                try await agent.setProperties(deviceId: "bare", ["temp_current": 20])
                // Unknown to the cache: sent unchecked (and, with nobody to answer, it times out).
                await #expect(throws: RequestError.timeout(deviceId: "never-seen", request: "properties/set", seconds: 0.1)) {
                    try await agent.setProperties(deviceId: "never-seen", ["x": 1], timeout: .milliseconds(100))
                }
                a.cancel()
                b.cancel()
                await unknownProduct.disconnect()
                await noInfo.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func offlineDeviceFailsAtOnceAndForceSendsAnyway() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                // Announced offline but still listening, like a device whose will fired but that still gets messages.
                let device = try await CommandFixture.device("bf12ab", broker, agent: agent, productId: "p-light-1",
                                                             online: false)
                let answering = try await device.answer("properties/set") { _ in #""code":0"# }
                let wire = try await TopicRecorder.start(broker.url, filter: Self.setTopics)
                let offline = await agent.sendPropertySet(deviceId: "bf12ab", ["switch_1": true])
                #expect(offline.result == .failure(.deviceOffline(deviceId: "bf12ab")))
                #expect(offline.msgId == nil)
                // The library's error names its own way to send anyway (the CLI's names --force).
                #expect(offline.error?.description.contains("force: true") == true)
                // Still checked against the model when forced.
                await #expect(throws: RequestError.invalid("bright_value: 1 is below the minimum 10")) {
                    try await agent.setProperties(deviceId: "bf12ab", ["bright_value": 1], force: true)
                }
                let forced = try await agent.setProperties(deviceId: "bf12ab", ["switch_1": true], force: true)
                let seen = try await wire.waitFor(count: 1)
                #expect(seen.count == 1)
                #expect(SimulatedDevice.msgId(in: seen[0].text) == forced.msgId)
                answering.cancel()
                await wire.stop()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aPersistentSessionDeviceGetsAForcedSetWhenItReturns() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                var session = MQTTConfiguration(url: broker.url, clientID: "sleepy-\(UInt32.random(in: 0...UInt32.max))")
                session.protocolVersion = .v5
                session.cleanSession = false
                session.sessionExpiry = 300
                let setTopic = "things/sleepy/thing/properties/set"
                let first = try MQTTClient(configuration: session)
                try await first.connect()
                try await first.subscribe(setTopic, qos: .atLeastOnce)
                try await first.publish("things/sleepy/thing/status", #"{"status":"offline"}"#, retain: true)
                await first.disconnect()
                try await waitUntil { agent.cache.device("sleepy")?.online == false }

                let wire = try await TopicRecorder.start(broker.url, filter: Self.setTopics)
                let pending = Task {
                    await agent.sendPropertySet(deviceId: "sleepy", ["switch_1": true], timeout: .seconds(30), force: true)
                }
                try await wire.waitFor(count: 1)
                // The device returns: the broker hands it the queued set, and it answers.
                let returned = try MQTTClient(configuration: session)
                let inbox = returned.messages
                try await returned.connect()
                var answered = false
                for await message in inbox where message.topic == setTopic {
                    let msgId = try #require(SimulatedDevice.msgId(in: message.text))
                    try await returned.publish(setTopic + "_response", #"{"msgId":"\#(msgId)","time":\#(t0),"code":0}"#)
                    answered = true
                    break
                }
                #expect(answered)
                let outcome = await pending.value
                #expect(outcome.succeeded, "\(outcome.outcome)")
                await wire.stop()
                await returned.disconnect()
            }
        }
    }
}
