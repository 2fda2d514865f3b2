import Foundation
import JSON
import Testing
import TestSupport

@Suite("thing-agent run, info and devices against a real broker", .serialized)
struct DaemonTests {
    @Test(.timeLimit(.minutes(1)))
    func reportsInInfoOut() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("bf12ab", brokerURL: broker.url)
            try await device.connect()
            try await device.info("""
                {"devId":"bf12ab","name":"Hall light","productId":"p-light-1","category":"device",
                 "ip":"203.0.113.7","lanIp":"192.168.1.23","mac":"a4:c1:38:00:11:22","timezone":"+08:00",
                 "netStrength":"76%","wifiSignal":-58,"iccid":null,"rsrp":null,"channel":null,"vendorName":null,
                 "homekitCode":null,"connectAbility":"gateway","gatewayId":"gw01","spaceId":1001,
                 "firmwareVersion":"1.4.2","abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}
                """, time: t0)
            try await device.status(true, time: t0)
            try await device.properties(#"{"switch_1":{"value":true,"time":\#(t0)},"bright_value":800,"mode":"white"}"#,
                                        time: t0)
            try await device.signal(wifi: -61, time: t0 + 5)

            let info = try await harness.waitForInfo("bf12ab") {
                $0["wifiSignal"] == -61 && $0["properties"]?["mode"] == "white"
            }
            #expect(info["devId"] == "bf12ab")
            #expect(info["name"] == "Hall light")
            #expect(info["lanIp"] == "192.168.1.23")
            #expect(info["mac"] == "a4:c1:38:00:11:22")
            #expect(info["timezone"] == "+08:00")
            #expect(info["netStrength"] == "76%")
            #expect(info["connectAbility"] == "gateway")
            #expect(info["spaceId"] == 1001)
            #expect(info["iccid"] == .null)
            #expect(info["homekitCode"] == .null)
            #expect(info["hardwareInfo"]?["module"] == "WBR3")
            #expect(info["online"] == true)
            #expect(info["properties"]?["switch_1"] == true)
            #expect(info["properties"]?["bright_value"] == 800)
            for key in ["ip", "lanIp", "mac", "timezone", "netStrength", "wifiSignal", "iccid", "connectAbility",
                        "channel", "rsrp", "homekitCode", "vendorName", "firmwareVersion", "abilities"] {
                #expect(info[key] != nil, "info --json lacks \(key)")
            }

            let text = try await harness.cli(["info", "bf12ab"])
            #expect(text.status == 0)
            #expect(text.stdout.contains("Hall light"))
            #expect(text.stdout.contains("-61 dBm"))

            let devices = try await harness.cli(["devices", "--json"])
            #expect(try JSONParser.parse(devices.stdout).arrayValue?.count == 1)
            let unknown = try await harness.cli(["info", "nosuchdevice"])
            #expect(unknown.status == 1)
            #expect(unknown.stderr.contains("unknown device"))
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func staleReportIgnoredAndDuplicateHarmless() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("d1", brokerURL: broker.url)
            try await device.connect()
            try await device.properties(#"{"bright_value":500}"#, time: t0 + 2000)
            try await device.properties(#"{"bright_value":100}"#, time: t0 + 1000)   // stale: older
            try await device.properties(#"{"bright_value":500}"#, time: t0 + 2000)   // duplicate
            try await device.properties(#"{"mode":"scene"}"#, time: t0 + 1500)       // marker, arrives last
            let info = try await harness.waitForInfo("d1") { $0["properties"]?["mode"] == "scene" }
            #expect(info["properties"]?["bright_value"] == 500)
            #expect(info["propertyTimes"]?["bright_value"] == .integer(t0 + 2000))
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func malformedPayloadsDroppedWhileValidOnesFlow() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("d2", brokerURL: broker.url)
            try await device.connect()
            try await device.properties(#"{"bright_value":300,"label":"a"}"#, time: t0)
            let garbage = ["not json", "[1,2,3]", "{\"data\":5}", "{\"time\":\"x\",\"data\":{\"bright_value\":1}}",
                           "{\"data\":{\"bright_value\":", String(repeating: "[", count: 5000),
                           "{\"data\":{\"label\":\"" + String(repeating: "x", count: 300_000) + "\"}}"]
            for payload in garbage {
                try await device.publish("properties", payload)
            }
            try await device.publish("info", #"{"time":1,"data":{"name":42}}"#)
            try await device.publish("status", #"{"status":"sleepy"}"#)
            let intruder = try SimulatedDevice("bad+id", brokerURL: broker.url)
            try await intruder.connect()
            try await intruder.client.publish("things/bad id/thing/properties", payload: Array(#"{"data":{"a":1}}"#.utf8))
            try await device.properties(#"{"label":"b"}"#, time: t0 + 1)
            let info = try await harness.waitForInfo("d2") { $0["properties"]?["label"] == "b" }
            #expect(info["properties"]?["bright_value"] == 300)
            #expect(info["name"] == .null)
            #expect(info["status"] == "unknown")
            #expect(harness.daemon?.isRunning == true)
            #expect(harness.daemon?.log.contains("dropped a message") == true)
            let devices = try await harness.cli(["devices", "--json"])
            #expect(try JSONParser.parse(devices.stdout).arrayValue?.count == 1)
            await device.disconnect()
            await intruder.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func sigtermExitsCleanlyAndTheCacheAloneKeepsEverything() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("d3", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Porch","productId":"p-light-1"}"#, time: t0)
            try await device.status(false, time: t0)
            try await device.properties(#"{"switch_1":true}"#, time: t0)
            _ = try await harness.waitForInfo("d3") { $0["properties"]?["switch_1"] == true }

            let daemon = try #require(harness.daemon)
            let stopped = ContinuousClock.now
            daemon.signal(SIGTERM)
            let status = await daemon.waitForExit(timeout: DaemonProcess.hangBound)
            #expect(status == 0, "exit status \(String(describing: status)) after \(ContinuousClock.now - stopped)")

            // The broker goes away too: the cache alone answers.
            broker.kill()
            let info = try #require(try await harness.info("d3"))
            #expect(info["name"] == "Porch")
            #expect(info["online"] == false)
            #expect(info["properties"]?["switch_1"] == true)
            await device.disconnect()
        }
    }
}
