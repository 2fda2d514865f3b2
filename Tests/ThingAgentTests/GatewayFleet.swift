import Foundation
import MQTT
import Synchronization
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// A small fleet on the test broker for gateway-replacement tests: `gwNew` (can replace gateways), `gwOld` (the
/// faulty one, offline) with sub-devices `sub1` and `sub2`, `gwFar` (same product, another space), `gwPlain`
/// (same product and space, no transfer ability) and `lamp` (a plain device).
struct GatewayFleet {
    let new: SimulatedDevice
    let old: SimulatedDevice
    let others: [SimulatedDevice]

    static func gatewayInfo(_ name: String, space: Int = 1001, abilities: [String] = ["gatewayTransfer"]) -> String {
        let list = abilities.map { "\"\($0)\"" }.joined(separator: ",")
        return #"{"name":"\#(name)","productId":"p-gateway-1","category":"gateway","spaceId":\#(space),"abilities":[\#(list)]}"#
    }

    static func start(_ broker: MosquittoBroker) async throws -> GatewayFleet {
        func device(_ id: String, _ info: String, online: Bool) async throws -> SimulatedDevice {
            let device = try SimulatedDevice(id, brokerURL: broker.url)
            try await device.connect()
            try await device.info(info, time: t0)
            try await device.status(online, time: t0)
            return device
        }
        let new = try await device("gwNew", gatewayInfo("New gateway"), online: true)
        let old = try await device("gwOld", gatewayInfo("Old gateway"), online: false)
        var others: [SimulatedDevice] = []
        others.append(try await device("gwFar", gatewayInfo("Far gateway", space: 2002), online: false))
        others.append(try await device("gwPlain", gatewayInfo("Plain gateway", abilities: []), online: true))
        for sub in ["sub1", "sub2"] {
            others.append(try await device(sub, #"{"name":"\#(sub)","category":"subdevice","gatewayId":"gwOld","spaceId":1001}"#,
                                           online: true))
        }
        others.append(try await device("lamp", #"{"name":"Lamp","category":"device","spaceId":1001}"#, online: true))
        return GatewayFleet(new: new, old: old, others: others)
    }

    /// Waits until `agent` cached the whole fleet.
    func cached(by agent: Agent) async throws {
        try await waitUntil {
            agent.cache.count >= 7 && agent.cache.all().allSatisfy { $0.online != nil && $0.info.name != nil }
        }
    }

    /// Publishes a transfer status report from `gwNew` about replacing `gwOld`.
    func report(_ status: TransferStatus, failedCode: String = "", time: Int64) async throws {
        try await new.publish("gateway/transfer/status", """
            {"msgId":"s\(time)","time":\(time),"data":{"targetDeviceId":"gwOld","targetDeviceName":"Old gateway",
             "sourceDeviceId":"gwNew","status":\(status.rawValue),"failedCode":"\(failedCode)"}}
            """)
    }

    func disconnect() async {
        await new.disconnect()
        await old.disconnect()
        for device in others { await device.disconnect() }
    }
}

/// Counts what is published on the transfer-start topics, to show that refused preconditions send nothing.
final class StartRequestSpy: Sendable {
    let client: MQTTClient
    private let seen: Tally

    final class Tally: Sendable {
        let count = Atomic<Int>(0)
    }

    init(_ broker: MosquittoBroker) async throws {
        let seen = Tally()
        self.seen = seen
        client = try MQTTClient(configuration: MQTTConfiguration(url: broker.url, clientID: "spy-\(UInt32.random(in: 0...UInt32.max))"),
                                streamMessages: false) { _ in seen.count.add(1, ordering: .relaxed) }
        try await client.connect()
        try await client.subscribe("things/+/thing/gateway/transfer/start", qos: .atLeastOnce)
    }

    var count: Int { seen.count.load(ordering: .relaxed) }
}

/// Records a transfer listener's calls; kept outside the listener so a released listener can be checked.
final class TransferLog: Sendable {
    private let entries = Mutex<[TransferInfo]>([])
    var statuses: [TransferStatus] { entries.withLock { $0.map(\.status) } }
    var last: TransferInfo? { entries.withLock { $0.last } }
    func append(_ info: TransferInfo) { entries.withLock { $0.append(info) } }
}

final class TransferRecorder: GatewayTransferManagerListener {
    let log: TransferLog
    init(_ log: TransferLog) { self.log = log }

    func gatewayTransferManager(_ manager: GatewayTransferManager, statusDidUpdate info: TransferInfo) {
        log.append(info)
    }
}
