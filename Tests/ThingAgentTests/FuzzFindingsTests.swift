import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Inputs that scripts/fuzz found breaking an invariant, kept as they were found (docs/faults.md).
@Suite("Fuzz findings")
struct FuzzFindingsTests {
    /// Runs the fuzz target's checks on one input: for each topic kind, a decoded message applies once and a repeat
    /// changes nothing, and the device comes back from SQLite as readers saw it in memory.
    static func check(_ input: String) throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try CacheStore(path: directory + "/cache.sqlite")
        let arrival: Millis = 1_764_450_000_000
        let kinds: [InboundKind] = [.properties, .status, .signal, .info, .transferStatus, .unbind]
            + RequestKind.allCases.map { .response($0) }
        for kind in kinds {
            let bytes = Array(input.utf8)
            guard let message = try? bytes.withUnsafeBytes({ try PayloadDecoder().decode(kind, payload: $0, arrival: arrival) })
            else { continue }
            var device = DeviceSnapshot(id: "fz", seenAt: arrival)
            _ = try device.apply(.info(["name": "n", "spaceId": 1], time: arrival - 10), now: arrival)
            guard (try? device.apply(message, now: arrival + 1)) != nil else { continue }
            let once = device
            #expect(try device.apply(message, now: arrival + 2).isEmpty)
            #expect(device == once)
            try store.database.execute("DELETE FROM properties; DELETE FROM transfers; DELETE FROM devices")
            try store.write(device, row: true, properties: device.properties.keys, transfer: true)
            let loaded = try #require(try store.loadDevice("fz"))
            #expect(loaded.json(now: arrival) == device.json(now: arrival), "\(kind)")
        }
    }

    /// The fuzzer's seed corpus (docs/protocol.md's examples and edge cases) passes the same checks.
    @Test func theSeedCorpusPassesTheFuzzChecks() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus")
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        #expect(files.count >= 20)
        for file in files {
            let data = try #require(FileManager.default.contents(atPath: corpus.appendingPathComponent(file).path))
            try Self.check(String(decoding: data, as: UTF8.self))
        }
    }

    /// crash-7476f3ae: `"spaceId":1e+001` is an integral double, valid for an integer field. Memory kept the double
    /// (`info --json` said 10.0) while the file kept the integer (10 after a restart).
    @Test func anIntegerFieldGivenAsAnIntegralDoubleIsKeptAsAnInteger() throws {
        try Self.check(#"""
            {"msgId":"8","time":1764450000000,"data":{"timezone":"fz","name":"Hall light","productId":"p-light-1","category":"device",
              "ip":"203.999999999999999999992.168.1.23","mac":"a4:c1:38:00:11:22","timezone":"+16:00",
              "net\trength":"76%","wifiSignaldorName":null,
              "homekitCode":null,"connectAbilatewayId":"gw01","spaceId":1e+001,"firmwareVersion":"1.4.2",
              "abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}}
            """#)
        var info = DeviceInfo(devId: "d")
        try info.merge(["spaceId": 10.0, "channel": -0.0])
        #expect(info.json["spaceId"] == .integer(10))
        #expect(info.json["channel"] == .integer(0))
    }
}
