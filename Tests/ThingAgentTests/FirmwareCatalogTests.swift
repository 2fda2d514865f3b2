import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

@Suite("Firmware versions, catalog and inventory")
struct FirmwareCatalogTests {
    static let hash = String(repeating: "ab", count: 32)

    @Test func versionsCompareAsDottedNumbersAndASuffixSortsFirst() throws {
        func v(_ text: String) throws -> FirmwareVersion { try #require(FirmwareVersion(text)) }
        #expect(try v("1.10.0") > v("1.9.3"))
        #expect(try v("2.0.0-rc1") < v("2.0.0"))
        #expect(try v("2.0.0-rc1") > v("1.99.99"))
        #expect(try v("1.5") == v("1.5.0"))
        #expect(try v("2.0.0-rc2") > v("2.0.0-rc1"))
        #expect(FirmwareVersion("1..2") == nil)
        #expect(FirmwareVersion("v1.2") == nil)
        #expect(FirmwareVersion("") == nil)
        #expect(FirmwareVersion.isNewer("1.5.0", than: "1.4.9"))
        #expect(!FirmwareVersion.isNewer("1.5.0", than: "1.5.0"))
        #expect(FirmwareVersion.isNewer("1.5.0", than: nil))
        #expect(DeviceDetailComposer.compareVersions("1.10.0", "1.9.9") > 0)
    }

    @Test func catalogErrorsNameTheProductAndTheKey() throws {
        let good = try FirmwareCatalog(json: JSONParser.parse(Array("""
            {"p-plug-1":{"version":"2.0.0","url":"https://fw.example/p.bin","sha256":"\(Self.hash)","size":5,"notes":"n"}}
            """.utf8)))
        #expect(good.latest(for: "p-plug-1")?.version == "2.0.0")
        #expect(good.latest(for: "p-plug-1")?.size == 5)
        let bad: [(String, String)] = [
            (#"{"p":{"version":"x","url":"u","sha256":"\#(Self.hash)"}}"#, "'version'"),
            (#"{"p":{"version":"1.0","url":"","sha256":"\#(Self.hash)"}}"#, "'url'"),
            (#"{"p":{"version":"1.0","url":"u","sha256":"12"}}"#, "'sha256'"),
            (#"{"p":{"version":"1.0","url":"u","sha256":"\#(Self.hash)","size":-1}}"#, "'size'"),
            (#"{"p":{"version":"1.0","url":"u","sha256":"\#(Self.hash)","colour":1}}"#, "'colour'"),
            (#"[1]"#, "top level"),
        ]
        for (text, named) in bad {
            #expect {
                try FirmwareCatalog(json: JSONParser.parse(Array(text.utf8)))
            } throws: { error in
                "\(error)".contains(named)
            }
        }
    }

    @Test func shippedCatalogLoads() throws {
        let catalog = try FirmwareCatalog(file: TestSupport.repositoryRoot() + "/Config/firmware.json")
        #expect(catalog.byProduct.keys.sorted() == ["p-gateway-1", "p-light-1", "p-plug-1"])
    }

    @Test func reloadReadsTheCatalogAgainAndKeepsItWhenTheFileBreaks() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/firmware.json"
        try FileManager.default.copyItem(atPath: TestSupport.repositoryRoot() + "/Config/firmware.json", toPath: file)
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.firmwareCatalog = file
        let agent = try Agent(configuration: configuration)
        #expect(agent.firmwareCatalog.latest(for: "p-light-1")?.version == "1.5.0")

        try #"{"p-light-1":{"version":"1.6.0","url":"https://fw.example/l","sha256":"\#(Self.hash)"}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let report = agent.reload(configuration)
        #expect(report.reloaded.contains { $0.contains("firmware catalog (1 products") }, "\(report.reloaded)")
        #expect(agent.firmwareCatalog.latest(for: "p-light-1")?.version == "1.6.0")

        try "{".write(toFile: file, atomically: true, encoding: .utf8)
        let broken = agent.reload(configuration)
        #expect(broken.kept.contains { $0.contains("firmware catalog") && $0.contains(file) }, "\(broken.kept)")
        #expect(agent.firmwareCatalog.latest(for: "p-light-1")?.version == "1.6.0", "the previous catalog stays")
    }

    @Test func inventoryCountsPerProductAndVersionAndListsTheDevicesBehind() throws {
        func device(_ id: String, _ product: String, _ version: String, online: Bool?) throws -> DeviceSnapshot {
            var snapshot = DeviceSnapshot(id: id, seenAt: 1)
            _ = try snapshot.apply(.info(JSONObject([("productId", .string(product)),
                                                     ("firmwareVersion", .string(version))]), time: 1), now: 1)
            if let online { _ = try snapshot.apply(.status(online: online, time: 2), now: 2) }
            return snapshot
        }
        let catalog = FirmwareCatalog(["p-light-1": .init(version: "1.10.0", url: "u", sha256: Self.hash)])
        let fleet = [
            try device("a", "p-light-1", "1.9.3", online: true), try device("b", "p-light-1", "1.9.3", online: false),
            try device("c", "p-light-1", "1.10.0", online: true), try device("d", "p-plug-1", "2.0.0", online: nil),
        ]
        let inventory = FirmwareInventory(devices: fleet, catalog: catalog)
        #expect(inventory.rows.count == 3)
        let behind = try #require(inventory.rows.first { $0.version == "1.9.3" })
        #expect(behind.online == 1 && behind.offline == 1 && behind.outdated && behind.latest == "1.10.0")
        #expect(inventory.rows.first { $0.version == "1.10.0" }?.outdated == false)
        #expect(inventory.rows.first { $0.productId == "p-plug-1" }?.latest == nil)
        #expect(inventory.outdated.map(\.deviceId) == ["a", "b"])
        #expect(inventory.outdated.first { $0.deviceId == "b" }?.online == false)
        #expect(FirmwareInventory(devices: fleet, catalog: catalog, product: "p-plug-1").rows.count == 1)
    }

    @Test func progressReportsOfTheWrongShapeAreRefused() throws {
        func decode(_ text: String) throws -> InboundMessage {
            try Array(text.utf8).withUnsafeBytes { try PayloadDecoder().decode(.otaProgress, payload: $0, arrival: 5) }
        }
        #expect(try decode(#"{"time":1764450001000,"data":{"version":"1.5.0","state":"downloading","progress":40}}"#)
                == .otaProgress(OTAProgressReport(version: "1.5.0", stage: .downloading, progress: 40, failedCode: "",
                                                  time: 1_764_450_001_000)))
        #expect(try decode(#"{"data":{"version":"1.5.0","state":"failed","failedCode":"verify"}}"#)
                == .otaProgress(OTAProgressReport(version: "1.5.0", stage: .failed, progress: 0, failedCode: "verify",
                                                  time: 5)))
        for bad in [#"{"data":{"version":"1.5.0","state":"succeeded"}}"#,
                    #"{"data":{"version":"1.5.0","state":"downloading","progress":101}}"#,
                    #"{"data":{"state":"downloading"}}"#, #"{"data":[]}"#] {
            #expect(throws: PayloadError.self) { try decode(bad) }
        }
    }
}
