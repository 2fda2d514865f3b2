import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Request tracking through a real broker: every request ends in exactly one clear outcome.
@Suite("Requests against a real broker", .serialized)
struct RequestTests {
    @Test(.timeLimit(.minutes(1)))
    func notConnectedEndsAsNotSentAndNothingIsTracked() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.mqtt.broker = "mqtt://127.0.0.1:\(try freeLoopbackPort())"
        let agent = try Agent(configuration: configuration)
        let outcome = await agent.send(.getInfo, to: "d1")
        let notConnected = RequestError.notSent(reason: "not connected to the broker (waitUntilConnected waits for it)")
        #expect(outcome.result == .failure(notConnected))
        #expect(outcome.msgId == nil)
        #expect(outcome.outcome == "notSent")
        #expect(agent.tracker.inFlight == 0)
        await #expect(throws: notConnected) {
            try await agent.setProperties(deviceId: "d1", ["switch_1": true])
        }
    }

    /// The library user's first minutes: `run()` in a task, then `waitUntilConnected`, then a request that works
    /// at once; the wait fails clearly in time while the broker is away and passes again once it is back.
    @Test(.timeLimit(.minutes(1)))
    func waitUntilConnectedWaitsForTheSubscriptionsAndTheBroker() async throws {
        var options = MosquittoBroker.Options()
        options.persistence = true
        try await withBroker(options) { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let agent = try Agent(configuration: agentConfiguration(broker, directory: directory))
            await #expect(throws: RequestError.notSent(
                reason: "not connected to the broker \(broker.url) within 0.05 s")) {
                try await agent.waitUntilConnected(timeout: .milliseconds(50))
            }
            let running = Task { try await agent.run() }
            defer { running.cancel() }
            try await agent.waitUntilConnected(timeout: .seconds(10))
            let device = try SimulatedDevice("lamp", brokerURL: broker.url)
            try await device.connect()
            let answering = try await device.answer("info/get") { _ in #""code":0,"data":{"name":"Lamp"}"# }
            defer { answering.cancel() }
            let outcome = await agent.send(.getInfo, to: "lamp", timeout: .seconds(5))
            #expect(outcome.succeeded, "\(outcome)")

            broker.kill()
            try await waitUntil { agent.connectionState != .connected }
            let early = Task { try await agent.waitUntilConnected(timeout: .seconds(20)) }
            await #expect(throws: RequestError.self) { try await agent.waitUntilConnected(timeout: .milliseconds(100)) }
            try await broker.restart()
            try await early.value
            #expect(agent.connectionState == .connected)
            await device.disconnect()
            running.cancel()
            try await running.value
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func boundReachedFailsAtOnceWithTooManyInFlight() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: { $0.maxInFlight = 3 }) { agent in
                let silent = try await CommandFixture.device("silent", broker, agent: agent)
                let waiting = (1...3).map { n in
                    Task { await agent.sendPropertySet(deviceId: "silent", ["n": .integer(Int64(n))]) }
                }
                try await waitUntil { agent.tracker.inFlight == 3 }
                let refused = await agent.send(.setProperties, to: "silent", data: ["n": 4])
                #expect(refused.result == .failure(.tooManyInFlight(limit: 3)))
                #expect(refused.msgId == nil)
                waiting.forEach { $0.cancel() }
                for task in waiting { #expect(await task.value.result == .failure(.cancelled)) }
                #expect(agent.tracker.inFlight == 0)
                // Room again once they ended.
                let again = await agent.send(.setProperties, to: "silent", data: ["n": 5], timeout: .milliseconds(50))
                #expect(again.error?.isTimeout == true)
                await silent.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func answersAreMatchedByMsgIdAndDeviceAndALateOneIsCountedAndLogged() async throws {
        try await withBroker { broker in
            let log = LogCapture()
            try await withAgent(broker, logger: log.logger) { agent in
                let device = try await CommandFixture.device("slow", broker, agent: agent)
                let other = try await CommandFixture.device("other", broker, agent: agent)
                let requests = try await TopicRecorder.start(broker.url, filter: "things/+/thing/properties/set")

                // An unknown msgId and the right msgId from another device leave the request waiting.
                let pending = Task { await agent.send(.setProperties, to: "slow", data: ["a": 1], timeout: .seconds(20)) }
                let msgId = try #require(SimulatedDevice.msgId(in: try await requests.waitFor(count: 1)[0].text))
                try await device.publish("properties/set_response", #"{"msgId":"nobody","time":\#(t0),"code":0}"#)
                try await other.publish("properties/set_response", #"{"msgId":"\#(msgId)","time":\#(t0),"code":0}"#)
                // Neither is one of this agent's requests: answers for other clients, not drops.
                try await waitUntil { agent.statistics.forOtherClients == 2 }
                #expect(agent.statistics.dropped[.unmatchedResponse] == nil)
                #expect(agent.tracker.inFlight == 1)
                try await device.publish("properties/set_response",
                                         #"{"msgId":"\#(msgId)","time":\#(t0),"code":0,"message":"ok"}"#)
                let answered = await pending.value
                #expect(answered.succeeded)
                #expect(answered.msgId == msgId)
                #expect(answered.response?.message == "ok")

                // A request that timed out, then its answer: dropped, counted, logged once.
                let timedOut = await agent.send(.setProperties, to: "slow", data: ["a": 2], timeout: .milliseconds(200))
                #expect(timedOut.result == .failure(.timeout(deviceId: "slow", request: "properties/set", seconds: 0.2)))
                let lateId = try #require(timedOut.msgId)
                try await device.publish("properties/set_response", #"{"msgId":"\#(lateId)","time":\#(t0),"code":0}"#)
                try await waitUntil { log.lines.contains { $0.contains("late answer") && $0.contains("msgId=\(lateId)") } }
                #expect(agent.statistics.dropped[.unmatchedResponse] == 1)
                #expect(agent.statistics.forOtherClients == 2)
                #expect(log.lines.filter { $0.contains("late answer") }.count == 1)
                await requests.stop()
                await device.disconnect()
                await other.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aBrokerThatStopsAnsweringEndsInTimeoutNotAHang() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let device = try await CommandFixture.device("d", broker, agent: agent)
                broker.pause()
                defer { broker.resume() }
                // The connection looks alive (keepalive is 30 s) but no PUBACK and no answer ever come.
                let outcome = await agent.send(.setProperties, to: "d", data: ["a": 1], timeout: .milliseconds(500))
                #expect(outcome.result == .failure(.timeout(deviceId: "d", request: "properties/set", seconds: 0.5)))
                broker.resume()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aThousandConcurrentRequestsToFiftyDevicesEachGetTheirOwnAnswer() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let ids = (0..<50).map { "dev\($0)" }
                var devices: [SimulatedDevice] = []
                var answering: [Task<Void, Never>] = []
                for id in ids {
                    let device = try SimulatedDevice(id, brokerURL: broker.url)
                    try await device.connect()
                    // Echo the value sent, and the device's own id, so each answer proves where it came from.
                    answering.append(try await device.answer("properties/set") { text in
                        let n = (try? JSONParser.parse(text))?["data"]?["n"]?.int64Value ?? -1
                        return #""code":0,"data":{"echo":\#(n),"from":"\#(id)"}"#
                    })
                    devices.append(device)
                }
                let outcomes = await withTaskGroup(of: (String, Int64, RequestOutcome).self) { group in
                    for (d, id) in ids.enumerated() {
                        for i in 0..<20 {
                            let n = Int64(d * 1000 + i)
                            group.addTask {
                                (id, n, await agent.sendPropertySet(deviceId: id, ["n": .integer(n)], timeout: .seconds(60)))
                            }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                #expect(outcomes.count == 1000)
                for (id, n, outcome) in outcomes {
                    #expect(outcome.succeeded, "\(id) \(n): \(outcome.outcome) \(outcome.message ?? "")")
                    #expect(outcome.response?.data?["echo"]?.int64Value == n)
                    #expect(outcome.response?.data?["from"]?.stringValue == id)
                }
                #expect(Set(outcomes.compactMap { $0.2.msgId }).count == 1000)
                #expect(agent.tracker.inFlight == 0)
                #expect(agent.statistics.dropped[.unmatchedResponse] == nil)
                answering.forEach { $0.cancel() }
                for device in devices { await device.disconnect() }
            }
        }
    }
}

