import Foundation
import JSON
import Testing
import TestSupport

/// `thing-agent scene list` and `scene run`: the real executable against a real broker.
@Suite("thing-agent scene against a real broker", .serialized)
struct SceneCommandTests {
    static let scenes = """
        {"scenes":[
          {"name":"evening","description":"lights on","actions":[
            {"device":"lamp","set":{"switch_1":true,"bright_value":300}},
            {"device":"grumpy","set":{"switch_1":true}},
            {"device":"plug","set":{"switch_1":true}}]},
          {"name":"quiet","actions":[
            {"device":"lamp","set":{"switch_1":false}},
            {"device":"plug","set":{"switch_1":false}}]}]}
        """

    @Test(.timeLimit(.minutes(2)))
    func listAndRunReportEveryAction() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory("thing-agent-e2e")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let file = directory + "/scenes.json"
            try Self.scenes.write(toFile: file, atomically: true, encoding: .utf8)
            let devices = [
                try await SetCommandTests.device("lamp", broker, answer: #""code":0"#),
                try await SetCommandTests.device("grumpy", broker, answer: #""code":1005,"message":"too bright""#),
                try await SetCommandTests.device("plug", broker, answer: #""code":0"#),
            ]
            let common = ["--broker", broker.url, "--db", directory + "/cache.sqlite"]
            func scene(_ arguments: [String], file: String? = file) async throws -> ProcessResult {
                try await runCommand(thingAgentExecutable(), ["scene"] + arguments + (file.map { ["--scenes", $0] } ?? []) + common)
            }

            let list = try await scene(["list"])
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains("evening") && list.stdout.contains("lamp,grumpy,plug"))
            let listJSON = try JSONParser.parse(try await scene(["list", "--json"]).stdout)
            #expect(listJSON.arrayValue?.compactMap { $0["name"]?.stringValue } == ["evening", "quiet"])

            let evening = try await scene(["run", "evening", "--json"])
            #expect(evening.status == 1, "one action failed: \(evening.stderr)")
            let report = try JSONParser.parse(evening.stdout)
            #expect(report["scene"] == "evening")
            #expect(report["succeeded"] == false)
            #expect(report["failed"] == 1)
            let actions = try #require(report["actions"]?.arrayValue)
            #expect(actions.compactMap { $0["device"]?.stringValue } == ["lamp", "grumpy", "plug"])
            #expect(actions.compactMap { $0["outcome"]?.stringValue } == ["success", "refused", "success"])
            #expect(actions[1]["code"] == 1005)
            #expect(actions[1]["message"] == "too bright")
            #expect(actions[0]["properties"]?["bright_value"] == 300)

            let text = try await scene(["run", "evening"])
            #expect(text.status == 1)
            #expect(text.stdout.contains("scene evening: 1 of 3 actions failed"))
            #expect(text.stdout.contains("too bright"))

            let quiet = try await scene(["run", "quiet"])
            #expect(quiet.status == 0, "\(quiet.stderr)")
            #expect(quiet.stdout.contains("scene quiet: all 2 actions applied"))

            let unknown = try await scene(["run", "nosuch"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("unknown scene 'nosuch'"))
            #expect(try await scene(["run"]).status == 2)
            #expect(try await scene([]).status == 2)
            #expect(try await scene(["dance"]).status == 2)
            let noFile = try await scene(["list"], file: nil)
            #expect(noFile.status == 2)
            #expect(noFile.stderr.contains("no scenes file"))
            try #"{"scenes":[{"name":"x"}]}"#.write(toFile: directory + "/bad.json", atomically: true, encoding: .utf8)
            let bad = try await scene(["list"], file: directory + "/bad.json")
            #expect(bad.status == 1)
            #expect(bad.stderr.contains("scenes file \(directory)/bad.json: scene 'x' needs a non-empty 'actions' array"))

            let noBroker = try await runCommand(thingAgentExecutable(), [
                "scene", "run", "quiet", "--scenes", file, "--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())",
                "--db", directory + "/cache.sqlite"])
            #expect(noBroker.status == 6)
            for (device, answering) in devices {
                answering.cancel()
                await device.disconnect()
            }
        }
    }
}
