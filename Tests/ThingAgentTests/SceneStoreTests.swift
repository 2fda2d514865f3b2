import Foundation
import JSON
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Scenes kept in the cache file: created, changed and deleted through the library and the API while the agent
/// runs, checked against the thing models, and the scenes file imported without overwriting the cache.
@Suite("Scenes in the cache", .serialized)
struct SceneStoreTests {
    static func configuration(_ broker: MosquittoBroker, _ directory: String, scenes: String? = nil) -> AgentConfiguration {
        var configuration = agentConfiguration(broker, directory: directory)
        useShippedModels(&configuration)
        configuration.scenesFile = scenes
        return configuration
    }

    /// One request to the agent's API and its answer.
    static func ask(_ broker: MosquittoBroker, _ agent: Agent, _ method: String, _ request: JSONObject) async throws -> JSONValue {
        try await askAPI(broker.url, daemon: agent.configuration.mqtt.clientID, method, request)
    }

    @Test(.timeLimit(.minutes(2)))
    func theFileIsCheckedAgainstKnownDevicesAndTheAPIChangesScenesAtOnce() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let lamp = try SimulatedDevice("lamp", brokerURL: broker.url)
            try await lamp.connect()
            try await lamp.info(#"{"productId":"p-light-1"}"#, time: t0)
            // A first run caches the lamp, so that the scenes file's values can be checked against its model.
            let first = try Agent(configuration: Self.configuration(broker, directory))
            let running = try await first.runUntilSubscribed()
            try await waitUntil(timeout: .seconds(20)) { first.cache.device("lamp") != nil }
            running.cancel()
            _ = try? await running.value

            let file = directory + "/scenes.json"
            try #"{"scenes":[{"name":"evening","actions":[{"device":"lamp","set":{"bright_value":300}}]},"#
                .appending(#"{"name":"loud","actions":[{"device":"lamp","set":{"bright_value":5000}}]}]}"#)
                .write(toFile: file, atomically: true, encoding: .utf8)
            let agent = try Agent(configuration: Self.configuration(broker, directory, scenes: file))
            #expect(agent.scenes.all.map(\.name) == ["evening"], "the model refuses loud's value")
            let serving = try await agent.runUntilSubscribed()
            defer { serving.cancel() }

            let created = try await Self.ask(broker, agent, "scenes", JSONObject([
                ("action", "create"), ("name", "movie"), ("description", "dim"),
                ("actions", [["device": "lamp", "set": ["bright_value": 100, "mode": "scene"]]]),
            ]))
            #expect(created["code"] == 0, "\(created)")
            #expect(try agent.scene(named: "movie")?.actions.first?.properties["mode"] == "scene")
            let refused = try await Self.ask(broker, agent, "scenes", JSONObject([
                ("action", "update"), ("name", "movie"), ("actions", [["device": "lamp", "set": ["mode": "disco"]]]),
            ]))
            #expect(refused["code"] == 422)
            #expect(refused["message"]?.stringValue?.contains("'disco' is not one of white, colour, scene") == true)
            let unknown = try await Self.ask(broker, agent, "scenes", JSONObject([("action", "delete"), ("name", "nosuch")]))
            #expect(unknown["code"] == 404)
            let listed = try await Self.ask(broker, agent, "scenes", JSONObject([("action", "list")]))
            #expect(listed["data"]?.arrayValue?.compactMap { $0["name"]?.stringValue } == ["evening", "movie"])
            #expect(listed["data"]?[1]?["description"] == "dim")
            // The listing alone, on its own topic, answers the same.
            #expect(try await Self.ask(broker, agent, "sceneList", JSONObject())["data"] == listed["data"])

            try agent.updateScene(Scene(name: "evening", actions: [Scene.Action(deviceId: "lamp", properties: ["switch_1": true])]))
            #expect(throws: EditError.sceneExists("evening")) {
                try agent.createScene(Scene(name: "evening", actions: [Scene.Action(deviceId: "lamp", properties: ["switch_1": true])]))
            }
            #expect(throws: EditError.unknownDevice("ghost")) {
                try agent.createScene(Scene(name: "ghost", actions: [Scene.Action(deviceId: "ghost", properties: ["switch_1": true])]))
            }
            try agent.deleteScene(named: "movie")
            let links = try await Self.ask(broker, agent, "links", JSONObject([("action", "list")]))
            #expect(links["data"] == [])
            #expect(try await Self.ask(broker, agent, "linkList", JSONObject())["data"] == [])
            serving.cancel()
            _ = try? await serving.value

            // Started again, the file gives evening as it did: the cache's changed evening stays.
            let again = try Agent(configuration: Self.configuration(broker, directory, scenes: file))
            #expect(again.scenes.all.map(\.name) == ["evening"])
            #expect(again.scenes.scene(named: "evening")?.actions.first?.properties == ["switch_1": true])
            await lamp.disconnect()
        }
    }

    /// Import, `scene delete`, the file changes the scene, SIGHUP: the delete stands, and the reload says so.
    @Test(.timeLimit(.minutes(1)))
    func aSceneDeletedInTheCacheStaysDeletedWhenTheFileChangesIt() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/scenes.json"
            func write(_ level: Int, extra: String = "") throws {
                try #"{"scenes":[{"name":"night","actions":[{"device":"lamp","set":{"bright_value":\#(level)}}]}"#
                    .appending(extra + "]}").write(toFile: file, atomically: true, encoding: .utf8)
            }
            try write(300)
            let configuration = Self.configuration(broker, directory, scenes: file)
            let agent = try Agent(configuration: configuration)
            #expect(try agent.scene(named: "night") != nil)
            try agent.deleteScene(named: "night")
            try write(200, extra: #",{"name":"dawn","actions":[{"device":"lamp","set":{"bright_value":500}}]}"#)
            let report = agent.reload(configuration)
            #expect(try agent.scene(named: "night") == nil, "a deleted scene came back")
            #expect(try agent.scene(named: "dawn") != nil)
            #expect(report.reloaded.contains { $0.contains("1 new") && $0.contains("deleted: night") }, "\(report)")
            // The same file again: nothing to say, still deleted.
            let again = agent.reload(configuration)
            #expect(try agent.scene(named: "night") == nil)
            #expect(again.reloaded.contains { $0.contains("0 kept as cached") }, "\(again)")
        }
    }
}
