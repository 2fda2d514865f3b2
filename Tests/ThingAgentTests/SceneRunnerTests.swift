import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Scenes run through a real broker: every action's outcome is reported, a failure does not stop the others.
@Suite("Scene runner against a real broker", .serialized)
struct SceneRunnerTests {
    @Test(.timeLimit(.minutes(1)))
    func oneFailingActionIsReportedAndTheOthersSucceed() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                let lamp = try await CommandFixture.device("lamp", broker, agent: agent, productId: "p-light-1")
                let grumpy = try await CommandFixture.device("grumpy", broker, agent: agent)
                let plug = try await CommandFixture.device("plug", broker, agent: agent)
                let lampHeard = Mutex<[Int64]>([])
                let answering = [
                    try await lamp.answer("properties/set") { text in
                        if let level = (try? JSONParser.parse(text))?["data"]?["bright_value"]?.int64Value {
                            lampHeard.withLock { $0.append(level) }
                        }
                        return #""code":0"#
                    },
                    try await grumpy.answer("properties/set") { _ in #""code":1006,"message":"busy""# },
                    try await plug.answer("properties/set") { _ in #""code":0"# },
                ]
                let scene = Scene(name: "evening", actions: [
                    Scene.Action(deviceId: "lamp", properties: ["switch_1": true, "bright_value": 200]),
                    Scene.Action(deviceId: "grumpy", properties: ["switch_1": true]),
                    Scene.Action(deviceId: "plug", properties: ["switch_1": true]),
                    Scene.Action(deviceId: "lamp", properties: ["bright_value": 300]),
                ])
                let report = await SceneRunner(agent: agent).run(scene)
                #expect(report.scene == "evening")
                #expect(report.actions.map(\.action) == scene.actions)
                #expect(report.actions.map(\.outcome.outcome) == ["success", "refused", "success", "success"])
                #expect(report.actions[1].outcome.result == .failure(.refused(code: 1006, message: "busy")))
                #expect(!report.succeeded)
                #expect(report.failedCount == 1)
                // One device's actions run in the scene's order, so its last action is the one that stays.
                #expect(lampHeard.withLock { $0 } == [200, 300])
                answering.forEach { $0.cancel() }
                for device in [lamp, grumpy, plug] { await device.disconnect() }
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func invalidAndOfflineActionsAreReportedWithoutBeingSent() async throws {
        try await withBroker { broker in
            try await withAgent(broker, models: [shippedModel("p-light-1")]) { agent in
                let lamp = try await CommandFixture.device("lamp", broker, agent: agent, productId: "p-light-1")
                let away = try await CommandFixture.device("away", broker, agent: agent, online: false)
                let answering = try await lamp.answer("properties/set") { _ in #""code":0"# }
                let wire = try await TopicRecorder.start(broker.url, filter: "things/+/thing/properties/set")
                let scene = Scene(name: "mixed", actions: [
                    Scene.Action(deviceId: "lamp", properties: ["mode": "disco"]),
                    Scene.Action(deviceId: "away", properties: ["switch_1": true]),
                ])
                let report = await SceneRunner(agent: agent).run(scene)
                #expect(report.actions.map(\.outcome.outcome) == ["invalid", "offline"])
                #expect(report.failedCount == 2)
                let all = await SceneRunner(agent: agent).run(Scene(name: "ok", actions: [
                    Scene.Action(deviceId: "lamp", properties: ["mode": "scene"]),
                ]))
                #expect(all.succeeded)
                #expect(try await wire.waitFor(count: 1).count == 1, "only the valid set reached the broker")
                answering.cancel()
                await wire.stop()
                await lamp.disconnect()
                await away.disconnect()
            }
        }
    }
}
