import JSON
import Testing
@testable import ThingAgent
@testable import ThingAgentCore

/// The scenes file format: what it accepts and the errors that name what is wrong.
@Suite("Scenes file")
struct SceneFileTests {
    func parse(_ text: String) throws(Scenes.LoadError) -> Scenes {
        try Scenes.parse(Array(text.utf8), file: "s.json")
    }

    func error(_ text: String) -> String? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func parsesScenesAndActionsInOrder() throws {
        let scenes = try parse("""
            {"scenes":[{"name":"evening","description":"warm","actions":[
               {"device":"bf12ab","set":{"switch_1":true,"bright_value":300}},
               {"device":"plug01","set":{"switch_1":false}}]},
             {"name":"off","actions":[{"device":"bf12ab","set":{"switch_1":false}}]}]}
            """)
        #expect(scenes.all.map(\.name) == ["evening", "off"])
        let evening = try #require(scenes.scene(named: "evening"))
        #expect(evening.description == "warm")
        #expect(evening.actions == [
            Scene.Action(deviceId: "bf12ab", properties: ["switch_1": true, "bright_value": 300]),
            Scene.Action(deviceId: "plug01", properties: ["switch_1": false]),
        ])
        #expect(scenes.scene(named: "morning") == nil)
    }

    @Test func mistakesAreErrorsNamingTheSceneAndAction() {
        #expect(error("[")?.hasPrefix("scenes file s.json: not valid JSON") == true)
        #expect(error("[]") == "scenes file s.json: needs an object with a 'scenes' array")
        #expect(error(#"{"scenes":[],"extra":1}"#) == "scenes file s.json: unknown key 'extra'")
        #expect(error(#"{"scenes":[{"actions":[]}]}"#) == "scenes file s.json: scene 1 needs a 'name'")
        #expect(error(#"{"scenes":[{"name":"a","actions":[]}]}"#)
                == "scenes file s.json: scene 'a' needs a non-empty 'actions' array")
        #expect(error(#"{"scenes":[{"name":"a","acions":[]}]}"#) == "scenes file s.json: scene 'a': unknown key 'acions'")
        #expect(error(#"{"scenes":[{"name":"a","actions":[{"device":"bad id","set":{"x":1}}]}]}"#)
                == "scenes file s.json: scene 'a', action 1 needs a valid 'device' id")
        #expect(error(#"{"scenes":[{"name":"a","actions":[{"device":"d","set":{}}]}]}"#)
                == "scenes file s.json: scene 'a', action 1 needs a non-empty 'set' object")
        #expect(error(#"{"scenes":[{"name":"a","actions":[{"device":"d","set":{"x":1},"when":"now"}]}]}"#)
                == "scenes file s.json: scene 'a', action 1: unknown key 'when'")
        #expect(error(#"{"scenes":[{"name":"a","actions":[{"device":"d","set":{"x":1}}]},"#
                      + #"{"name":"a","actions":[{"device":"d","set":{"x":2}}]}]}"#)
                == "scenes file s.json: scene 'a' is defined twice")
        #expect(error(#"{"scenes":[{"name":"a","description":5,"actions":[{"device":"d","set":{"x":1}}]}]}"#)
                == "scenes file s.json: scene 'a': 'description' must be a string")
    }

    @Test func missingFileIsAnErrorNamingIt() {
        #expect {
            try Scenes(file: "/nonexistent/scenes.json")
        } throws: { error in
            "\(error)".hasPrefix("scenes file /nonexistent/scenes.json: cannot read it")
        }
    }

    @Test func theShippedScenesFileLoadsAndFitsTheShippedModels() throws {
        let scenes = try Scenes(file: repositoryRoot + "/Config/scenes.json")
        #expect(scenes.all.map(\.name) == ["evening", "all-off"])
        let models = try ThingModels(directory: repositoryRoot + "/Config/models")
        let products = ["bf12ab": "p-light-1", "plug01": "p-plug-1", "gw01": "p-gateway-1"]
        for scene in scenes.all {
            for action in scene.actions {
                let model = try #require(models.model(for: products[action.deviceId]))
                try model.validate(action.properties)
            }
        }
    }

    @Test func scenesFileAndModelsDirectoryAreConfigurationKeys() throws {
        var configuration = AgentConfiguration()
        try configuration.apply(environment: ["THING_AGENT_SCENES": "/etc/scenes.json", "THING_AGENT_MODELS": "/m"])
        #expect(configuration.scenesFile == "/etc/scenes.json")
        #expect(configuration.modelsDirectory == "/m")
        try configuration.apply(key: "scenesFile", text: "other.json", source: "--scenes")
        #expect(configuration.scenesFile == "other.json")
        try configuration.apply(file: repositoryRoot + "/Config/agent.json")
        #expect(configuration.scenesFile == "Config/scenes.json")
        #expect(configuration.modelsDirectory == "Config/models")
    }
}
