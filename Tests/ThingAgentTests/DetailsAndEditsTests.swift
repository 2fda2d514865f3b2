import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Local edits, removal, the offline-warning switch and the detail composer, in process.
@Suite("edits, removal and device details (library)", .serialized)
struct DetailsAndEditsTests {
    /// The library's way to groups and backup networks: changes through `apply`, reads beside `metadata`.
    @Test(.timeLimit(.minutes(1)))
    func groupsAndNetworksThroughTheAgent() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let lamp = try SimulatedDevice("lamp", brokerURL: broker.url)
                try await lamp.connect()
                try await lamp.status(true, time: t0)
                try await waitUntil { agent.cache.device("lamp") != nil }
                _ = try agent.apply(.createGroup("downstairs", devices: ["lamp"]))
                _ = try agent.apply(.addNetwork(device: "lamp", BackupNetwork(ssid: "Home", password: "s3cretpass", priority: 5)))
                #expect(try agent.groups().map(\.name) == ["downstairs"])
                #expect(try agent.groups().first?.devices == ["lamp"])
                #expect(try agent.backupNetworks("lamp").map(\.ssid) == ["Home"])
                #expect(throws: EditError.unknownDevice("ghost")) {
                    _ = try agent.apply(.createGroup("attic", devices: ["ghost"]))
                }
                await lamp.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func offlineWarningSwitchIsHonoured() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: { $0.offlineGracePeriod = .seconds(0.2) }) { agent in
                let warnings = Mutex<[String]>([])
                let listener = agent.events.addListener(kinds: .offlineWarning) { event in
                    warnings.withLock { $0.append(event.deviceId) }
                }
                let quiet = try SimulatedDevice("quiet", brokerURL: broker.url)
                let loud = try SimulatedDevice("loud", brokerURL: broker.url)
                try await quiet.connect()
                try await loud.connect()
                try await quiet.status(true, time: t0)
                try await loud.status(true, time: t0)
                try await waitUntil { agent.cache.device("quiet")?.online == true && agent.cache.device("loud")?.online == true }
                try agent.edit("quiet", DeviceEdit(offlineWarning: false))
                #expect(try agent.metadata("quiet").offlineWarning == false)

                // "quiet" goes offline first: were it warned about, its warning would come before "loud"'s.
                try await quiet.status(false, time: t0 + 10)
                try await waitUntil { agent.cache.device("quiet")?.online == false }
                try await loud.status(false, time: t0 + 10)
                try await waitUntil(timeout: .seconds(10)) { warnings.withLock { $0.contains("loud") } }
                #expect(warnings.withLock { $0 } == ["loud"])
                listener.cancel()
                await quiet.disconnect()
                await loud.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func localNameSurvivesInfoReportsAndRemovalForgetsTheDevice() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent, directory in
                let device = try SimulatedDevice("tv", brokerURL: broker.url)
                try await device.connect()
                try await device.info(#"{"name":"TV","productId":"p-plug-1"}"#, time: t0)
                try await waitUntil { agent.cache.device("tv")?.info.name == "TV" }
                #expect(throws: EditError.unknownDevice("radio")) { try agent.rename("radio", to: "x") }
                try agent.edit("tv", DeviceEdit(name: "Living-room TV", room: "Living room"))
                try await device.info(#"{"name":"TV (factory)"}"#, time: t0 + 1)
                try await waitUntil { agent.cache.device("tv")?.info.name == "TV (factory)" }
                let snapshot = try #require(agent.cache.device("tv"))
                let metadata = try agent.metadata("tv")
                #expect(snapshot.displayName(metadata) == "Living-room TV")
                #expect(snapshot.json(now: 0, metadata: metadata)["name"] == "Living-room TV")
                #expect(snapshot.json(now: 0, metadata: metadata)["reportedName"] == "TV (factory)")
                try agent.edit("tv", DeviceEdit(name: ""))
                #expect(try agent.metadata("tv").name == nil)
                #expect(try agent.metadata("tv").room == "Living room")

                let local = try #require(agent.local)
                try local.createGroup("evening", devices: ["tv"])
                try local.addBackupNetwork("tv", BackupNetwork(ssid: "Spare", password: "password1", priority: 2))
                #expect(throws: EditError.groupExists("evening")) { try local.createGroup("evening") }
                #expect(throws: EditError.invalid("a WPA password has 8 to 63 characters")) {
                    try local.addBackupNetwork("tv", BackupNetwork(ssid: "Short", password: "x"))
                }

                try await agent.removeDevice("tv")
                #expect(agent.cache.device("tv") == nil)
                #expect(try local.groups(containing: "tv").isEmpty)
                #expect(try local.backupNetworks("tv").isEmpty)
                #expect(try CacheReader(path: directory + "/cache.sqlite").device("tv") == nil)
                await #expect(throws: EditError.unknownDevice("tv")) { try await agent.removeDevice("tv") }

                try await device.properties(#"{"switch_1":false}"#, time: t0 + 2)
                try await waitUntil { agent.cache.device("tv")?.properties["switch_1"] != nil }
                #expect(try agent.metadata("tv").room == nil)
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func customCellProvidersAndClicks() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let device = try SimulatedDevice("fan", brokerURL: broker.url)
                try await device.connect()
                try await device.info(#"{"name":"Fan","productId":"p-plug-1","firmwareVersion":"1.2.0"}"#, time: t0)
                try await waitUntil { agent.cache.device("fan") != nil }
                let config = try DetailConfig(json: JSONParser.parse("""
                    [{"name":"main","items":[{"cellType":"header"},{"cellType":"c_test_insert"},
                      {"cellType":"c_test_async_insert"},{"cellType":"c_hidden"},{"cellType":"c_slow"},
                      {"cellType":"check_firmware_update","versions":{"p-plug-1":"1.10.0"}},
                      {"cellType":"help_and_feedback"},{"cellType":"c_nobody"},{"cellType":"off_line_warn"}]}]
                    """))
                let composer = DeviceDetailComposer(agent: agent, config: config)
                composer.register("c_test_insert") { context in .string("sync for \(context.deviceId)") }
                composer.registerAsync("c_test_async_insert") { context in
                    try? await Task.sleep(for: .milliseconds(10))
                    return .object(JSONObject([("name", context.device?.info.name.map(JSONValue.string) ?? .null)]))
                }
                composer.register("c_hidden") { _ in nil }
                composer.registerAsync("c_slow", timeout: .milliseconds(50)) { _ in
                    try? await Task.sleep(for: .seconds(30))
                    return .string("late")
                }
                let page = await composer.compose("fan")
                #expect(page.sections[0].items.map(\.cellType) == [
                    "header", "c_test_insert", "c_test_async_insert", "c_slow", "check_firmware_update",
                    "help_and_feedback", "c_nobody", "off_line_warn"])
                #expect(page.item("c_test_insert")?.data == "sync for fan")
                #expect(page.item("c_test_async_insert")?.data?["name"] == "Fan")
                #expect(page.item("c_slow")?.status == .failed)
                #expect(page.item("check_firmware_update")?.data?["updateAvailable"] == true)
                #expect(page.item("help_and_feedback")?.status == .notAvailableHere)
                #expect(page.item("c_nobody")?.status == .unknownCellType)

                composer.clearInsertItem()
                let cleared = await composer.compose("fan")
                #expect(cleared.item("c_test_insert")?.status == .unknownCellType)
                #expect(cleared.item("c_hidden")?.status == .unknownCellType)

                let clicks = Mutex<[DetailAction]>([])
                composer.onClick { action in clicks.withLock { $0.append(action) } }
                try await composer.click(DetailAction(deviceId: "fan", cellType: "off_line_warn", action: "toggle"))
                try await composer.click(DetailAction(deviceId: "fan", cellType: "header", action: "rename", value: "Ceiling fan"))
                #expect(clicks.withLock { $0.map(\.action) } == ["toggle", "rename"])
                let after = await composer.compose("fan")
                #expect(after.item("off_line_warn")?.data?["enabled"] == false)
                #expect(after.item("header")?.data?["name"] == "Ceiling fan")
                #expect(DeviceDetailComposer.compareVersions("1.10.0", "1.9.9") > 0)
                #expect(throws: DetailConfig.Error.self) { try DetailConfig(json: JSONParser.parse(#"[{"items":[]}]"#)) }
                await device.disconnect()
            }
        }
    }
}
