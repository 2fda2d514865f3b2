import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// "Stale values lose", "a repeat changes nothing" and partial info merges, on the pure snapshot logic.
@Suite("Cache rules")
struct CacheRulesTests {
    var device = DeviceSnapshot(id: "d1", seenAt: 1)

    @Test mutating func staleAndDuplicatePropertiesLose() throws {
        var changes = try device.apply(.properties([("p", PropertyValue(value: 1, time: 100))]), now: 2)
        #expect(changes.properties.map(\.code) == ["p"])
        changes = try device.apply(.properties([("p", PropertyValue(value: 0, time: 99))]), now: 3)
        #expect(changes.isEmpty)
        #expect(device.properties["p"] == PropertyValue(value: 1, time: 100))
        changes = try device.apply(.properties([("p", PropertyValue(value: 1, time: 100))]), now: 4)
        #expect(changes.isEmpty)
        changes = try device.apply(.properties([("p", PropertyValue(value: 2, time: 101))]), now: 5)
        #expect(changes.properties.first?.previous == 1)
        #expect(changes.events(for: device).count == 1)
    }

    @Test mutating func sameValueNewerTimeIsPersistedButNotAnEvent() throws {
        _ = try device.apply(.properties([("p", PropertyValue(value: 1, time: 100))]), now: 2)
        let changes = try device.apply(.properties([("p", PropertyValue(value: 1, time: 200))]), now: 3)
        #expect(changes.properties.count == 1)
        #expect(changes.events(for: device).isEmpty)
        #expect(device.properties["p"]?.time == 200)
    }

    @Test mutating func stalePropertyDoesNotBlockFreshOnesInSameMessage() throws {
        _ = try device.apply(.properties([("a", PropertyValue(value: 1, time: 100))]), now: 2)
        let changes = try device.apply(.properties([
            ("a", PropertyValue(value: 0, time: 50)), ("b", PropertyValue(value: "x", time: 50)),
        ]), now: 3)
        #expect(changes.properties.map(\.code) == ["b"])
        #expect(device.properties["a"]?.value == 1)
    }

    @Test mutating func statusFlipsAndStaleStatusLoses() throws {
        var changes = try device.apply(.status(online: true, time: 100), now: 2)
        #expect(changes.status == true)
        changes = try device.apply(.status(online: false, time: 90), now: 3)
        #expect(changes.isEmpty)
        #expect(device.online == true)
        changes = try device.apply(.status(online: true, time: 120), now: 4)
        #expect(changes.status == nil)
        #expect(device.statusTime == 120)
        #expect(device.statusChangedAt == 100)
        changes = try device.apply(.status(online: false, time: 130), now: 5)
        #expect(changes.status == false)
        #expect(device.statusChangedAt == 130)
    }

    @Test mutating func signalFieldsAreIndependent() throws {
        _ = try device.apply(.signal(wifi: SignalReading(dBm: -50, time: 100), rsrp: nil), now: 2)
        let changes = try device.apply(.signal(wifi: SignalReading(dBm: -70, time: 90),
                                               rsrp: SignalReading(dBm: -97, time: 90)), now: 3)
        #expect(changes.wifiSignal == nil)
        #expect(changes.rsrp?.dBm == -97)
        #expect(device.wifiSignal?.dBm == -50)
        #expect(device.info.wifiSignal == -50)
    }

    @Test mutating func partialInfoMerges() throws {
        _ = try device.apply(.info(["name": "Hall light", "ip": "203.0.113.7", "abilities": ["wifiList"]],
                                   time: 100), now: 2)
        let changes = try device.apply(.info(["ip": "203.0.113.8", "hardwareInfo": ["module": "WBR3"]],
                                             time: 110), now: 3)
        #expect(changes.info)
        #expect(device.info.name == "Hall light")
        #expect(device.info.ip == "203.0.113.8")
        #expect(device.info.hardwareInfo?["module"] == "WBR3")
        #expect(device.info.supports(.wifiList))
        #expect(!device.info.supports(.gatewayTransfer))
    }

    @Test mutating func infoWithWrongTypeChangesNothing() throws {
        _ = try device.apply(.info(["name": "Hall light"], time: 100), now: 2)
        let before = device
        #expect(throws: PayloadError.self) {
            try device.apply(.info(["name": "New", "spaceId": "not a number"], time: 110), now: 3)
        }
        #expect(device == before)
        #expect(throws: PayloadError.self) {
            try device.apply(.info(["category": "toaster"], time: 120), now: 3)
        }
        #expect(device == before)
    }

    @Test mutating func staleInfoOfTheWrongShapeIsStillRefused() throws {
        _ = try device.apply(.info(["name": "Hall light"], time: 100), now: 2)
        let before = device
        #expect(throws: PayloadError.self) { try device.apply(.info(["name": 42], time: 50), now: 3) }
        #expect(throws: PayloadError.self) { try device.apply(.info(["wifiSignal": -999], time: 50), now: 3) }
        #expect(device == before)
        // A stale report of the right shape is passed over quietly.
        #expect(try device.apply(.info(["name": "Old"], time: 50), now: 3).isEmpty)
        #expect(device == before)
    }

    @Test mutating func infoSignalFollowsSignalRules() throws {
        _ = try device.apply(.signal(wifi: SignalReading(dBm: -40, time: 200), rsrp: nil), now: 2)
        _ = try device.apply(.info(["name": "n", "wifiSignal": -80], time: 150), now: 3)
        #expect(device.wifiSignal?.dBm == -40)
        #expect(device.info.name == "n")
    }

    @Test mutating func transferProgress() throws {
        let report = TransferStatusReport(targetDeviceId: "gwOld", targetDeviceName: nil, sourceDeviceId: "d1",
                                          status: .deviceConfigInit, failedCode: "", time: 100)
        var changes = try device.apply(.transferStatus(report), now: 2)
        #expect(changes.transfer?.status == .deviceConfigInit)
        var stale = report
        stale.status = .finish
        stale.time = 50
        changes = try device.apply(.transferStatus(stale), now: 3)
        #expect(changes.isEmpty)
        #expect(device.transfer?.status == .deviceConfigInit)
    }

    /// The migrations are frozen SQL, so a field added to `DeviceInfo` without a migration of its own has no column.
    @Test func everyInfoFieldHasItsColumnAfterTheMigrations() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try CacheStore(path: directory + "/cache.sqlite")
        var columns: [String: String] = [:]
        for row in try store.database.query("PRAGMA table_info(devices)") {
            if let name = row.string("name") { columns[name] = row.string("type") }
        }
        for field in DeviceInfo.fields {
            #expect(columns[field.column] == (field.type.isInteger ? "INTEGER" : "TEXT"), "column \(field.column)")
        }
        for column in CacheSchema.stateColumns {
            #expect(columns[column] == (column == "presence" ? "TEXT" : "INTEGER"), "column \(column)")
        }
    }
}
