import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Firmware upgrades through the library: `OTAManager` on the daemon's agent, a real broker and cache file.
@Suite("OTAManager", .serialized)
struct OTAManagerTests {
    final class Heard: OTAManagerListener {
        let stages = Mutex<[OTAStage]>([])
        func otaManager(_ manager: OTAManager, statusDidUpdate upgrade: OTAUpgrade) {
            stages.withLock { $0.append(upgrade.stage) }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func anUpgradeIsHeardStageByStageAndEndsOnlyOnTheReportedVersion() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let catalog = directory + "/firmware.json"
            let hash = String(repeating: "0f", count: 32)
            try #"{"p-light-1":{"version":"1.5.0","url":"https://fw.example/l","sha256":"\#(hash)"}}"#
                .write(toFile: catalog, atomically: true, encoding: .utf8)
            try await withAgent(broker, configure: { $0.firmwareCatalog = catalog }) { agent in
                let events = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/ota9/ota")
                let device = try SimulatedDevice("ota9", brokerURL: broker.url)
                try await device.connect()
                try await device.info(#"{"productId":"p-light-1","firmwareVersion":"1.4.2"}"#, time: t0)
                try await device.status(true, time: t0)
                try await waitUntil { agent.cache.device("ota9")?.online == true }
                let answering = try await device.answer("ota/start") { _ in #""code":0"# }
                // The detail cell reads the catalog first: its layout's own `versions` only for other products.
                let layout = try DetailConfig(json: JSONParser.parse(Array("""
                    [{"name":"main","items":[{"cellType":"check_firmware_update","versions":{"p-light-1":"0.1.0"}}]}]
                    """.utf8)))
                let cell = await DeviceDetailComposer(agent: agent, config: layout).compose("ota9")
                    .item("check_firmware_update")?.data
                #expect(cell?["available"] == "1.5.0" && cell?["current"] == "1.4.2" && cell?["updateAvailable"] == true)
                let manager = agent.otaManager(deviceId: "ota9")
                #expect(manager.checkFirmwareUpgrade().upgradeAvailable)
                #expect(manager.checkFirmwareUpgrade().latest?.version == "1.5.0")
                let heard = Heard()
                manager.addListener(heard)
                let updates = manager.statusUpdates
                let started = try await manager.startUpgrade()
                #expect(started.stage == .accepted && started.fromVersion == "1.4.2")

                let rebootTime = Timestamp.current
                try await device.publish("ota/progress", """
                    {"time":\(rebootTime),"data":{"version":"1.5.0","state":"rebooting","progress":100}}
                    """)
                try await waitUntil { manager.currentUpgrade()?.stage == .rebooting }
                // Another version's report changes nothing; the target version ends it.
                try await device.publish("ota/progress", """
                    {"time":\(Timestamp.current),"data":{"version":"9.9.9","state":"failed"}}
                    """)
                // After its reboot report: only a newer info is the device's word after the reboot.
                try await device.info(#"{"firmwareVersion":"1.5.0"}"#, time: rebootTime + 1)
                var seen: [OTAStage] = []
                for await upgrade in updates {
                    seen.append(upgrade.stage)
                    if !upgrade.isRunning { break }
                }
                #expect(seen == [.accepted, .rebooting, .succeeded])
                try await waitUntil { heard.stages.withLock { $0 } == [.accepted, .rebooting, .succeeded] }
                #expect(!manager.checkFirmwareUpgrade().upgradeAvailable)
                await #expect(throws: RequestError.self) { try await manager.startUpgrade() }

                let published = try await events.waitFor(count: 3)
                let stages = published.compactMap { try? JSONParser.parse($0.payload)["data"]?["stage"]?.stringValue }
                #expect(stages == ["accepted", "rebooting", "succeeded"])
                answering.cancel()
                await events.stop()
                await device.disconnect()
            }
        }
    }
}
