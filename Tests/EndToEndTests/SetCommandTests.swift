import Foundation
import JSON
import Testing
import TestSupport

/// `thing-agent set`: the real executable against a real broker, one exit code per outcome.
@Suite("thing-agent set against a real broker", .serialized)
struct SetCommandTests {
    /// docs/protocol.md's example model, written where `--models` can find it.
    static func writeLightModel(in directory: String) throws -> String {
        let models = directory + "/models"
        try FileManager.default.createDirectory(atPath: models, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: shippedModelPath("p-light-1"), toPath: models + "/p-light-1.json")
        return models
    }

    /// A device that answers every set with `body` (nil: never answers).
    static func device(_ id: String, _ broker: MosquittoBroker, productId: String? = nil, online: Bool = true,
                       answer body: String?) async throws -> (SimulatedDevice, Task<Void, Never>) {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        if let productId { try await device.info(#"{"productId":"\#(productId)"}"#, time: t0) }
        try await device.status(online, time: t0)
        let answering = try await device.answer("properties/set") { _ in body }
        return (device, answering)
    }

    @Test(.timeLimit(.minutes(2)))
    func everyOutcomeHasItsExitCode() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let models = try Self.writeLightModel(in: harness.directory)
            let devices = [
                try await Self.device("lamp", broker, productId: "p-light-1", answer: #""code":0"#),
                try await Self.device("grumpy", broker, answer: #""code":1005,"message":"too bright""#),
                try await Self.device("mute", broker, answer: nil),
                try await Self.device("sleepy", broker, online: false, answer: #""code":0"#),
            ]
            _ = try await harness.waitForInfo("lamp") { $0["productId"] == "p-light-1" && $0["online"] == true }
            _ = try await harness.waitForInfo("sleepy") { $0["online"] == false }
            let wire = try await TopicRecorder.start(broker.url, filter: "things/+/thing/properties/set")
            func set(_ arguments: [String]) async throws -> ProcessResult {
                try await harness.cli(["set"] + arguments + ["--models", models])
            }

            let applied = try await set(["lamp", "switch_1=true", "bright_value=300", "mode=white"])
            #expect(applied.status == 0, "\(applied.stderr)")
            #expect(applied.stdout.hasPrefix("lamp: applied bright_value=300 mode=white switch_1=true (msgId "))

            let json = try await set(["lamp", #"label="800""#, "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let outcome = try JSONParser.parse(json.stdout)
            #expect(outcome["device"] == "lamp")
            #expect(outcome["outcome"] == "success")
            #expect(outcome["code"] == 0)
            #expect(outcome["msgId"]?.stringValue?.isEmpty == false)
            #expect((outcome["elapsedMs"]?.int64Value ?? -1) >= 0)
            #expect(outcome["properties"]?["label"] == "800", "a quoted value stays a string")

            let invalid = try await set(["lamp", "bright_value=5000"])
            #expect(invalid.status == 3)
            #expect(invalid.stderr.contains("bright_value: 5000 is above the maximum 1000; nothing was sent"))
            let invalidJSON = try await set(["lamp", "mode=disco", "--json"])
            #expect(invalidJSON.status == 3)
            #expect(try JSONParser.parse(invalidJSON.stdout)["outcome"] == "invalid")
            #expect(try JSONParser.parse(invalidJSON.stdout)["msgId"] == .null)

            let refused = try await set(["grumpy", "switch_1=true"])
            #expect(refused.status == 4)
            #expect(refused.stderr.contains("code 1005 (value out of range): too bright"))

            let timeout = try await set(["mute", "switch_1=true", "--timeout", "0.5"])
            #expect(timeout.status == 5)
            #expect(timeout.stderr.contains("no answer from mute to properties/set within 0.5 s"))

            let offline = try await set(["sleepy", "switch_1=true"])
            #expect(offline.status == 7)
            #expect(offline.stderr.contains("sleepy is offline"))
            #expect(offline.stderr.contains("use --force to send anyway"), "\(offline.stderr)")
            let forced = try await set(["sleepy", "switch_1=true", "--force"])
            #expect(forced.status == 0, "\(forced.stderr)")

            let noBroker = try await runCommand(thingAgentExecutable(), [
                "set", "lamp", "switch_1=true", "--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())",
                "--db", harness.database])
            #expect(noBroker.status == 6)
            #expect(noBroker.stderr.contains("cannot use the broker"))

            // Five sets were published (applied, json, grumpy, mute, forced); never the invalid ones.
            let published = try await wire.waitFor(count: 5).map(\.text)
            #expect(published.count == 5)
            #expect(!published.contains { $0.contains("5000") || $0.contains("disco") })
            await wire.stop()
            for (device, answering) in devices {
                answering.cancel()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func worksWithoutTheDaemon() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory("thing-agent-e2e")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (device, answering) = try await Self.device("lamp", broker, answer: #""code":0,"message":"done""#)
            let result = try await runCommand(thingAgentExecutable(), [
                "set", "lamp", "switch_1=false", "--json", "--broker", broker.url, "--db", directory + "/cache.sqlite"])
            #expect(result.status == 0, "\(result.stderr)")
            let outcome = try JSONParser.parse(result.stdout)
            #expect(outcome["outcome"] == "success")
            #expect(outcome["message"] == "done")
            #expect(outcome["properties"]?["switch_1"] == false)
            answering.cancel()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func badCommandLinesAreUsageErrors() async throws {
        let directory = try makeTemporaryDirectory("thing-agent-e2e")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let common = ["--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())", "--db", directory + "/cache.sqlite"]
        let cases: [([String], String)] = [
            (["set", "lamp", "noequals"], "'noequals' is not CODE=VALUE"),
            (["set"], "missing DEVICE"),
            (["set", "lamp"], "nothing to set"),
            (["set", "lamp", "=1"], "'=1' is not CODE=VALUE"),
            (["set", "lamp", "a=1", "a=2"], "a is given twice"),
            (["set", "lamp", "a=1", "--timeout", "0"], "--timeout needs a positive number"),
            (["set", "bad/id", "a=1"], "is not a device id"),
            (["set", "lamp", "a=1", "--bogus"], "unknown option '--bogus'"),
        ]
        for (arguments, message) in cases {
            let result = try await runCommand(thingAgentExecutable(), arguments + common)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
        let help = try await runCommand(thingAgentExecutable(), ["set", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("4  refused by the device"))
    }

    @Test(.timeLimit(.minutes(1)))
    func aBadModelFileIsAClearErrorAtStart() async throws {
        let directory = try makeTemporaryDirectory("thing-agent-e2e")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/models", withIntermediateDirectories: true)
        try "{".write(toFile: directory + "/models/broken.json", atomically: true, encoding: .utf8)
        let common = ["--broker", "mqtt://127.0.0.1:\(try freeLoopbackPort())", "--db", directory + "/cache.sqlite",
                      "--models", directory + "/models"]
        let set = try await runCommand(thingAgentExecutable(), ["set", "lamp", "a=1"] + common)
        #expect(set.status == 1)
        #expect(set.stderr.contains("thing model \(directory)/models/broken.json: not valid JSON"))
        let run = try await runCommand(thingAgentExecutable(), ["run"] + common)
        #expect(run.status == 1)
        #expect(run.stderr.contains("broken.json"))
    }
}
