import Foundation
import TestSupport
import JSON
import Testing
@testable import ThingAgent
@testable import ThingAgentCore

/// The relink rule and the choice of replaceable gateways, on the pure snapshot logic.
@Suite("Gateway rules")
struct GatewayRulesTests {
    @Test func relinkCountsAsAnInfoReportAtTheFinishTime() throws {
        var sub = DeviceSnapshot(id: "sub1", seenAt: 1)
        _ = try sub.apply(.info(["gatewayId": "gwOld", "name": "Sensor"], time: 100), now: 2)
        sub.relink(to: "gwNew", at: 500, now: 3)
        #expect(sub.info.gatewayId == "gwNew")
        #expect(sub.infoTime == 500)
        // A retained copy from before the transfer loses entirely.
        var changes = try sub.apply(.info(["gatewayId": "gwOld", "name": "Old name"], time: 100), now: 4)
        #expect(changes.isEmpty)
        #expect(sub.info.gatewayId == "gwNew")
        // A newer report is the device's own word.
        changes = try sub.apply(.info(["gatewayId": "gwOld"], time: 600), now: 5)
        #expect(changes.info)
        #expect(sub.info.gatewayId == "gwOld")
    }

    @Test func relinkNeverMovesInfoTimeBackwards() {
        var sub = DeviceSnapshot(id: "sub1", seenAt: 1)
        sub.infoTime = 900
        sub.relink(to: "gwNew", at: 500, now: 3)
        #expect(sub.infoTime == 900)
    }

    static func gateway(_ id: String, product: String? = "p-gw", space: Int64? = 1, category: String = "gateway")
        -> DeviceSnapshot {
        var device = DeviceSnapshot(id: id, seenAt: 1)
        var fields = JSONObject([("category", .string(category))])
        if let product { fields["productId"] = .string(product) }
        if let space { fields["spaceId"] = .integer(space) }
        device.info = DeviceInfo(devId: id, fields: fields)
        return device
    }

    @Test func replaceableGatewaysShareProductAndSpace() {
        let me = Self.gateway("me")
        #expect(Self.gateway("a").isReplaceable(by: me))
        #expect(!me.isReplaceable(by: me))
        #expect(!Self.gateway("b", product: "other").isReplaceable(by: me))
        #expect(!Self.gateway("c", space: 2).isReplaceable(by: me))
        #expect(!Self.gateway("d", category: "device").isReplaceable(by: me))
        #expect(!Self.gateway("e", product: nil).isReplaceable(by: Self.gateway("f", product: nil)))
    }

    @Test func stalledTransferIsFailedOnlyWhileUnchanged() throws {
        let hub = EventHub()
        let cache = DeviceCache()
        let writer = CacheWriter(store: nil, journal: nil, cache: cache, hub: hub)
        let report = TransferStatusReport(targetDeviceId: "gwOld", targetDeviceName: nil, sourceDeviceId: "gwNew",
                                          status: .deviceDataInit, failedCode: "", time: 100)
        _ = try writer.apply(.transferStatus(report), to: "gwNew", now: 1_000)
        // Someone saw an older change: nothing happens.
        let topic = "things/gwNew/thing/gateway/transfer/status"
        #expect(try writer.failStalledTransfer(gateway: "gwNew", lastChange: 999, now: 5_000, topic: topic)?.status
            == .deviceDataInit)
        let failed = try #require(try writer.failStalledTransfer(gateway: "gwNew", lastChange: 1_000, now: 5_000,
                                                                 topic: topic))
        #expect(failed.status == .failed)
        #expect(failed.failedCode == "timeout")
        #expect(failed.time == 5_000)
        #expect(cache.device("gwNew")?.transfer == failed)
        // Already over: left alone.
        #expect(try writer.failStalledTransfer(gateway: "gwNew", lastChange: 5_000, now: 9_000, topic: topic) == failed)
    }

    /// The daemon journals a stall verdict like a report: killed before SQLite got it, it replays it at start.
    @Test func aStallVerdictIsJournaledAndReplayed() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        let topic = "things/gwNew/thing/gateway/transfer/status"
        do {
            let writer = CacheWriter(store: try CacheStore(path: configuration.cache.database),
                                     journal: try Journal(path: configuration.cache.database + ".journal"),
                                     cache: DeviceCache(), hub: EventHub())
            let report = TransferStatusReport(targetDeviceId: "gwOld", targetDeviceName: "Old", sourceDeviceId: "gwNew",
                                              status: .deviceConfigInit, failedCode: "", time: t0)
            _ = try writer.apply(.transferStatus(report), to: "gwNew", now: 1_000, raw: (topic, report.payload))
            _ = try writer.failStalledTransfer(gateway: "gwNew", lastChange: 1_000, now: 9_000, topic: topic)
            // No flush: the process dies here.
        }
        #expect(try CacheReader(path: configuration.cache.database).device("gwNew") == nil)
        let agent = try Agent(configuration: configuration)
        let replayed = try #require(agent.cache.device("gwNew")?.transfer)
        #expect(replayed.status == .failed)
        #expect(replayed.failedCode == "timeout")
        #expect(replayed.targetDeviceName == "Old")
        #expect(try CacheReader(path: configuration.cache.database).device("gwNew")?.transfer == replayed)
    }
}
