import Foundation
import JSON
import MQTT
import Synchronization
import Testing
import TestSupport
import ThingAgent

/// `gateways`, `transfer` and `wifi-scan` through the real executable, next to the real daemon.
@Suite("thing-agent gateways, transfer and wifi-scan", .serialized)
struct GatewayCommandsTests {
    /// gwNew (can replace gateways), gwOld (faulty, offline) with sub1 and sub2, and plug (Wi-Fi scan).
    static func fleet(_ broker: MosquittoBroker) async throws -> [SimulatedDevice] {
        func device(_ id: String, _ info: String, online: Bool) async throws -> SimulatedDevice {
            let device = try SimulatedDevice(id, brokerURL: broker.url)
            try await device.connect()
            try await device.info(info, time: t0)
            try await device.status(online, time: t0)
            return device
        }
        let gateway = #""productId":"p-gateway-1","category":"gateway","spaceId":1001"#
        return [
            try await device("gwNew", #"{"name":"New",\#(gateway),"abilities":["gatewayTransfer"]}"#, online: true),
            try await device("gwOld", #"{"name":"Old",\#(gateway),"abilities":["gatewayTransfer"]}"#, online: false),
            try await device("sub1", #"{"category":"subdevice","gatewayId":"gwOld"}"#, online: true),
            try await device("sub2", #"{"category":"subdevice","gatewayId":"gwOld"}"#, online: true),
            try await device("plug", #"{"name":"Plug","abilities":["wifiList"]}"#, online: true),
        ]
    }

    /// How the scripted gateway answers the next transfer start: its code, then (when 0) the statuses it reports.
    final class Script: Sendable {
        private let plan = Mutex<(code: Int, statuses: [(TransferStatus, String)])>((0, []))
        func set(code: Int = 0, _ statuses: [(TransferStatus, String)] = []) { plan.withLock { $0 = (code, statuses) } }
        var current: (code: Int, statuses: [(TransferStatus, String)]) { plan.withLock { $0 } }
    }

    /// Answers transfer starts on `gateway` as `script` says, reporting the statuses a step apart.
    /// (A device's message stream has one consumer for its life, so one task follows every script change.)
    static func play(_ script: Script, on gateway: SimulatedDevice) async throws -> Task<Void, Never> {
        let topic = gateway.topic("gateway/transfer/start")
        let stream = gateway.client.messages
        try await gateway.client.subscribe(topic, qos: .atLeastOnce)
        return Task {
            for await message in stream where message.topic == topic {
                guard let msgId = SimulatedDevice.msgId(in: message.text) else { continue }
                let (code, statuses) = script.current
                try? await gateway.publish("gateway/transfer/start_response",
                                           #"{"msgId":"\#(msgId)","time":\#(Timestamp.current),"code":\#(code)}"#)
                guard code == 0 else { continue }
                for (status, failedCode) in statuses {
                    try? await Task.sleep(for: .milliseconds(150))
                    try? await gateway.publish("gateway/transfer/status", """
                        {"time":\(Timestamp.current),"data":{"targetDeviceId":"gwOld","sourceDeviceId":"gwNew",
                         "status":\(status.rawValue),"failedCode":"\(failedCode)"}}
                        """)
                }
            }
        }
    }

    static func waitForFleet(_ harness: AgentHarness) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            let listed = try await harness.cli(["devices", "--json"])
            if let devices = try? JSONParser.parse(listed.stdout).arrayValue, devices.count == 5 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestSupportError("the daemon did not cache the fleet")
    }

    @Test(.timeLimit(.minutes(2)))
    func transferShowsItsStagesAndDevicesListsTheRelinkedSubDevices() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let devices = try await Self.fleet(broker)
            try await Self.waitForFleet(harness)

            let gateways = try await harness.cli(["gateways", "gwNew", "--json"])
            #expect(gateways.status == 0)
            let listed = try JSONParser.parse(gateways.stdout).arrayValue ?? []
            #expect(listed.map { $0["devId"] } == ["gwOld"])
            #expect(listed.first?["subDeviceCount"] == 2)
            let text = try await harness.cli(["gateways", "gwNew"])
            #expect(text.stdout.contains("gwOld") && text.stdout.contains("offline"))

            let script = Script()
            script.set([(.deviceConfigInit, ""), (.deviceDataInit, ""), (.osConfigInit, ""), (.finish, "")])
            let playing = try await Self.play(script, on: devices[0])
            let transfer = try await harness.cli(["transfer", "gwNew", "--from", "gwOld"])
            #expect(transfer.status == 0, "\(transfer.stdout) \(transfer.stderr)")
            for stage in ["deviceConfigInit (1/4)", "deviceDataInit (2/4)", "osConfigInit (3/4)", "finish (4/4)"] {
                #expect(transfer.stdout.contains(stage), "missing \(stage): \(transfer.stdout)")
            }
            #expect(transfer.stdout.contains("finished: 2 sub-devices of gwOld now on gwNew: sub1, sub2"))

            let moved = try await harness.cli(["devices", "--gateway", "gwNew", "--json"])
            #expect(try JSONParser.parse(moved.stdout).arrayValue?.map { $0["devId"] } == ["sub1", "sub2"])
            let left = try await harness.cli(["devices", "--gateway", "gwOld", "--json"])
            #expect(try JSONParser.parse(left.stdout).arrayValue?.isEmpty == true)
            let info = try #require(try await harness.info("gwNew"))
            #expect(info["transfer"]?["statusName"] == "finish")
            playing.cancel()
            for device in devices { await device.disconnect() }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func everyEndOtherThanFinishExitsNonZeroWithItsReason() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let devices = try await Self.fleet(broker)
            try await Self.waitForFleet(harness)
            let args = ["transfer", "gwNew", "--from", "gwOld"]

            // Preconditions: nothing is sent.
            let unsupported = try await harness.cli(["transfer", "plug", "--from", "gwOld"])
            #expect(unsupported.status == 1)
            #expect(unsupported.stderr.contains("no gatewayTransfer ability"))
            let unknown = try await harness.cli(["transfer", "gwNew", "--from", "sub1"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("sub1 is not a gateway it can replace"))
            let missing = try await harness.cli(["transfer", "gwNew"])
            #expect(missing.status == 2)

            // Refused by the gateway.
            let script = Script()
            let playing = try await Self.play(script, on: devices[0])
            script.set(code: 1006)
            let refused = try await harness.cli(args)
            #expect(refused.status == 4)
            #expect(refused.stderr.contains("1006 (busy)"))

            // Failed, with the gateway's code.
            script.set([(.deviceConfigInit, ""), (.failed, "no_route")])
            let failed = try await harness.cli(args)
            #expect(failed.status == 1)
            #expect(failed.stderr.contains("failed with failedCode no_route"))

            // Stalled: ended by the stall timeout (and recorded as failed with failedCode timeout). The daemon gives
            // that verdict with its own timer, so it runs with the short stall timeout.
            try await harness.stopDaemon()
            try await harness.startDaemon(environment: ["THING_AGENT_TRANSFER_STALL_TIMEOUT": "1"])
            script.set([(.deviceConfigInit, "")])
            let stalled = try await runCommand(thingAgentExecutable(), args + ["--broker", broker.url, "--db", harness.database],
                                               environment: ["THING_AGENT_TRANSFER_STALL_TIMEOUT": "1"])
            #expect(stalled.status == 5)
            #expect(stalled.stderr.contains("made no progress for 1 s"))
            // The daemon's own timer ends it in the file (at its next check, a moment later on a loaded machine).
            try await waitUntil(timeout: .seconds(10)) {
                (try? await harness.info("gwNew"))?["transfer"]?["failedCode"] == "timeout"
            }

            // Out of patience: the transfer goes on, the command stops waiting.
            let patience = try await harness.cli(args + ["--timeout", "0.5"])
            #expect(patience.status == 5)
            #expect(patience.stderr.contains("gave up waiting after 0.5 s"))
            playing.cancel()
            for device in devices { await device.disconnect() }
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func wifiScanListsOneLinePerNetworkStrongestFirst() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let devices = try await Self.fleet(broker)
            try await Self.waitForFleet(harness)
            let plug = devices[4]
            let answering = try await plug.answer("wifi/scan") { _ in
                #""code":0,"data":[{"ssid":"Cafe","rssi":-72,"sec":0},{"ssid":"Home","rssi":-58,"sec":5},"#
                    + #"{"ssid":"Home","rssi":-44,"sec":5},{"ssid":"","rssi":-40}]"#
            }
            let json = try await harness.cli(["wifi-scan", "plug", "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let networks = try JSONParser.parse(json.stdout).arrayValue ?? []
            #expect(networks.map { $0["ssid"] } == ["Home", "Cafe"])
            #expect(networks.map { $0["rssi"] } == [-44, -72])
            #expect(networks.map { $0["quality"] } == ["excellent", "weak"])
            let text = try await harness.cli(["wifi-scan", "plug"])
            #expect(text.stdout.contains("excellent") && text.stdout.contains("2 networks seen by plug"))

            let unsupported = try await harness.cli(["wifi-scan", "sub1"])
            #expect(unsupported.status == 1)
            #expect(unsupported.stderr.contains("no wifiList ability"))
            let offline = try await harness.cli(["wifi-scan", "gwOld"])
            #expect(offline.status == 1, "gwOld has no wifiList ability either")
            answering.cancel()
            for device in devices { await device.disconnect() }
        }
    }
}
