import Foundation
import JSON
import Testing
import TestSupport

/// Device details, edits, removal, events over MQTT and the request/response API, through the real executable
/// and the real mosquitto clients.
@Suite("details, edits, removal and MQTT integration", .serialized)
struct DetailsAndIntegrationTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// A `mosquitto_sub` (or other client) run in the background, its output in a file.
    static func background(_ tool: String, _ arguments: [String], in directory: String) throws -> DaemonProcess {
        try DaemonProcess("/usr/bin/\(tool)", arguments,
                          logPath: directory + "/\(tool)-\(UInt32.random(in: 0...UInt32.max)).log")
    }

    /// Repeats `send` until `done` holds: a subscriber started as a process gives no sign when it has subscribed.
    static func repeatUntil(timeout: Duration = .seconds(15), _ done: @Sendable () -> Bool,
                            _ send: () async throws -> Void) async throws {
        let deadline = ContinuousClock.now + timeout
        while !done() {
            guard ContinuousClock.now < deadline else { throw TestSupportError("no answer within \(timeout)") }
            try await send()
            for _ in 0..<10 where !done() { try await Task.sleep(for: .milliseconds(50)) }
        }
    }

    static func mosquittoPub(_ broker: MosquittoBroker, _ arguments: [String]) async throws {
        let port = String(broker.url.split(separator: ":").last!)
        let result = try await runCommand("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", port, "-q", "1"] + arguments)
        guard result.status == 0 else { throw TestSupportError("mosquitto_pub failed: \(result.stderr)") }
    }

    static func port(_ broker: MosquittoBroker) -> String { String(broker.url.split(separator: ":").last!) }

    @Test(.timeLimit(.minutes(2)))
    func editsSurviveInfoReportsAndRemoveClearsRetainedTopicsAndUnbinds() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("lamp1", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Lamp","productId":"p-light-1"}"#, time: t0)
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("lamp1") { $0["online"] == true }

            // Edits from the CLI while the daemon runs.
            let edit = try await harness.cli(["edit", "lamp1", "--name", "Desk lamp", "--room", "Study",
                                              "--icon", "https://example.com/lamp.png", "--offline-warning", "off"])
            #expect(edit.status == 0, "\(edit.stderr)")
            try await device.info(#"{"name":"Lamp v2","firmwareVersion":"1.4.3"}"#, time: t0 + 1000)
            let info = try await harness.waitForInfo("lamp1") { $0["firmwareVersion"] == "1.4.3" }
            #expect(info["name"] == "Desk lamp")
            #expect(info["reportedName"] == "Lamp v2")
            #expect(info["room"] == "Study")
            #expect(info["icon"] == "https://example.com/lamp.png")
            #expect(info["offlineWarning"] == false)
            let badIcon = try await harness.cli(["edit", "lamp1", "--icon", "not a url"])
            #expect(badIcon.status == 2)
            let unknown = try await harness.cli(["edit", "nosuch", "--name", "x"])
            #expect(unknown.status == 1)

            // Groups and backup networks.
            #expect(try await harness.cli(["group", "create", "downstairs", "lamp1"]).status == 0)
            #expect(try await harness.cli(["network", "add", "lamp1", "Backup_2G", "--password", "secret123",
                                           "--priority", "5"]).status == 0)
            let groups = try await harness.cli(["group", "list", "--json"])
            #expect(try JSONParser.parse(groups.stdout)[0]?["devices"] == ["lamp1"])
            let networks = try await harness.cli(["network", "list", "lamp1", "--json"])
            #expect(try JSONParser.parse(networks.stdout)[0]?["ssid"] == "Backup_2G")
            #expect(!networks.stdout.contains("secret123"))

            // Remove: an unbind request goes out, retained topics are cleared, the daemon forgets the device.
            let port = Self.port(broker)
            let unbinds = try Self.background("mosquitto_sub", ["-h", "127.0.0.1", "-p", port, "-q", "1", "-v",
                                                                "-t", "things/lamp1/thing/unbind", "-t", "probe/unbind"],
                                              in: harness.directory)
            // A subscriber run as a process gives no sign when it has subscribed: probe until it hears one.
            try await Self.repeatUntil({ unbinds.log.contains("probe/unbind") }) {
                try await Self.mosquittoPub(broker, ["-t", "probe/unbind", "-m", "ping"])
            }
            let removed = try await harness.cli(["remove", "lamp1"])
            #expect(removed.status == 0, "\(removed.stderr)")
            try await waitUntil(timeout: .seconds(10)) { unbinds.log.contains("things/lamp1/thing/unbind ") }
            let line = try #require(unbinds.log.split(separator: "\n").first { $0.hasPrefix("things/lamp1/thing/unbind ") })
            let unbind = try JSONParser.parse(String(line.dropFirst("things/lamp1/thing/unbind ".count)))
            #expect(unbind["msgId"]?.stringValue?.isEmpty == false)
            #expect(unbind["time"]?.int64Value != nil)

            // A fresh subscriber gets retained messages at once on subscribing, before anything published later:
            // once the probe it subscribed to with them arrives, anything retained would have come first.
            let fresh = try Self.background("mosquitto_sub", ["-h", "127.0.0.1", "-p", port, "-v",
                                                              "-t", "things/lamp1/#", "-t", "probe/retained"],
                                            in: harness.directory)
            try await Self.repeatUntil({ fresh.log.contains("probe/retained") }) {
                try await Self.mosquittoPub(broker, ["-t", "probe/retained", "-m", "ping"])
            }
            #expect(!fresh.log.contains("things/lamp1/"), "retained left: \(fresh.log)")
            try await waitUntil(timeout: .seconds(10)) { (try? await harness.info("lamp1")) == nil }
            let groupsAfter = try await harness.cli(["group", "list", "--json"])
            #expect(try JSONParser.parse(groupsAfter.stdout)[0]?["devices"] == [])

            // A later message makes it known again, without the old local data.
            try await device.properties(#"{"switch_1":true}"#, time: t0 + 5000)
            let back = try await harness.waitForInfo("lamp1") { $0["properties"]?["switch_1"] == true }
            #expect(back["name"] == .null)
            #expect(back["room"] == .null)
            #expect(back["offlineWarning"] == true)
            #expect(harness.daemon?.log.contains("device removed") == true)
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func outsideServiceUsesTheAPIAndEventsWithMosquittoClients() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("plug7", brokerURL: broker.url)
            try await device.connect()
            let answering = try await device.answer("properties/set") { _ in #""code":0"# }
            try await device.info(#"{"name":"Kettle plug","productId":"p-plug-1"}"#, time: t0)
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("plug7") { $0["online"] == true }
            #expect(try await harness.cli(["edit", "plug7", "--name", "Kettle", "--room", "Kitchen"]).status == 0)
            let port = Self.port(broker)
            let requests = "thing-agent/api/\(harness.clientID)/request"

            // MQTT 5: response topic and correlation data.
            let v5 = try Self.background("mosquitto_sub", [
                "-h", "127.0.0.1", "-p", port, "-V", "mqttv5", "-t", "thing-agent/replies/svc/v5", "-C", "1", "-W", "30",
                "-F", "%D|%p"], in: harness.directory)
            try await Self.repeatUntil({ !v5.isRunning }) {
                try await Self.mosquittoPub(broker, [
                    "-V", "mqttv5", "-t", "\(requests)/info", "-m", #"{"id":"r1","device":"plug7"}"#,
                    "-D", "publish", "response-topic", "thing-agent/replies/svc/v5", "-D", "publish", "correlation-data", "corr-42"])
            }
            let v5Line = v5.log.trimmingCharacters(in: .whitespacesAndNewlines)
            let bar = try #require(v5Line.firstIndex(of: "|"))
            #expect(v5Line[..<bar] == "corr-42")
            let v5Reply = try JSONParser.parse(String(v5Line[v5Line.index(after: bar)...]))
            #expect(v5Reply["id"] == "r1")
            #expect(v5Reply["code"] == 0)
            #expect(v5Reply["data"]?["name"] == "Kettle")
            #expect(v5Reply["data"]?["reportedName"] == "Kettle plug")
            #expect(v5Reply["data"]?["room"] == "Kitchen")

            // MQTT 3.1.1: replyTo in the payload; the device list.
            let v311 = try Self.background("mosquitto_sub", [
                "-h", "127.0.0.1", "-p", port, "-V", "mqttv311", "-t", "thing-agent/replies/svc/legacy", "-C", "1", "-W", "30"],
                in: harness.directory)
            try await Self.repeatUntil({ !v311.isRunning }) {
                try await Self.mosquittoPub(broker, ["-V", "mqttv311", "-t", "\(requests)/devices",
                                                     "-m", #"{"id":"r2","replyTo":"thing-agent/replies/svc/legacy"}"#])
            }
            let list = try JSONParser.parse(v311.log.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(list["id"] == "r2")
            #expect(list["data"]?[0]?["devId"] == "plug7")
            #expect(list["data"]?[0]?["name"] == "Kettle")

            // A property set through the agent, and an unknown device.
            let sets = try Self.background("mosquitto_sub", [
                "-h", "127.0.0.1", "-p", port, "-t", "thing-agent/replies/svc/set", "-C", "2", "-W", "30"], in: harness.directory)
            try await Self.repeatUntil({ sets.log.contains("\"r3\"") }) {
                try await Self.mosquittoPub(broker, ["-t", "\(requests)/set", "-m",
                    #"{"id":"r3","device":"plug7","data":{"switch_1":true},"replyTo":"thing-agent/replies/svc/set"}"#])
            }
            try await Self.mosquittoPub(broker, ["-t", "\(requests)/info", "-m",
                #"{"id":"r4","device":"ghost","replyTo":"thing-agent/replies/svc/set"}"#])
            try await waitUntil(timeout: .seconds(10)) { !sets.isRunning }
            let replies = try sets.log.split(separator: "\n").map { try JSONParser.parse(String($0)) }
            let set = try #require(replies.first { $0["id"] == "r3" })
            #expect(set["code"] == 0)
            #expect(set["data"]?["outcome"] == "success")
            let ghost = try #require(replies.first { $0["id"] == "r4" })
            #expect(ghost["code"] == 404)

            // Events: what listeners see, under thing-agent/events/D/<kind>.
            let events = try Self.background("mosquitto_sub", [
                "-h", "127.0.0.1", "-p", port, "-t", "thing-agent/events/plug7/properties", "-C", "1", "-W", "30"],
                in: harness.directory)
            var value = 0
            try await Self.repeatUntil({ !events.isRunning }) {
                value += 1
                try await device.properties(#"{"power":\#(value)}"#, time: t0 + Int64(value))
            }
            let event = try JSONParser.parse(events.log.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(event["devId"] == "plug7")
            #expect(event["event"] == "properties")
            #expect(event["data"]?["power"]?["value"]?.int64Value != nil)
            answering.cancel()
            await device.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func detailPagesForADeviceAndAGateway() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let gateway = try SimulatedDevice("gw01", brokerURL: broker.url)
            let light = try SimulatedDevice("bulb3", brokerURL: broker.url)
            try await gateway.connect()
            try await light.connect()
            try await gateway.info(#"{"name":"Hub","category":"gateway","productId":"p-gateway-1","firmwareVersion":"2.0.1"}"#,
                                   time: t0)
            try await light.info(#"{"name":"Bulb","category":"subdevice","gatewayId":"gw01","productId":"p-light-1","firmwareVersion":"1.4.2","abilities":["wifiList"]}"#,
                                 time: t0)
            try await light.status(true, time: t0)
            try await light.signal(wifi: -55, time: t0)
            let answering = try await light.answer("info/get") { _ in #""code":0,"data":{"firmwareVersion":"1.4.2"}"# }
            _ = try await harness.waitForInfo("bulb3") { $0["wifiSignal"] == -55 }
            _ = try await harness.waitForInfo("gw01") { $0["category"] == "gateway" }
            #expect(try await harness.cli(["edit", "bulb3", "--room", "Hall"]).status == 0)
            #expect(try await harness.cli(["group", "create", "lights", "bulb3"]).status == 0)

            let config = Self.repository + "/Config/deviceDetailConfig.json"
            let result = try await harness.cli(["detail", "bulb3", "--json", "--detail-config", config])
            #expect(result.status == 0, "\(result.stderr)")
            let page = try JSONParser.parse(result.stdout)
            let sections = try #require(page["sections"]?.arrayValue)
            #expect(sections.map { $0["name"] } == ["headerSection", "offLineWarnSection", "otherSection", "footerSection"])
            #expect(sections[1]["header"]?["cellType"] == "section_off_line_warn")
            #expect(sections[3]["margin"]?["top"] == 16)
            func item(_ type: String) -> JSONValue? {
                sections.lazy.compactMap { $0["items"]?.arrayValue }.joined().first { $0["cellType"]?.stringValue == type }
            }
            #expect(sections[0]["items"]?.arrayValue?.map { $0["cellType"] } == ["header", "device_info", "net_setting", "group_edit_devices"])
            #expect(item("header")?["data"]?["name"] == "Bulb")
            #expect(item("header")?["data"]?["room"] == "Hall")
            #expect(item("device_info")?["data"]?["gatewayId"] == "gw01")
            #expect(item("group_edit_devices")?["data"]?["groups"] == ["lights"])
            #expect(item("off_line_warn")?["data"]?["enabled"] == true)
            for phoneOnly in ["bind_multi_control_link", "help_and_feedback", "add_icon_to_home_screen"] {
                #expect(item(phoneOnly)?["status"] == "notAvailableHere", "\(phoneOnly)")
            }
            #expect(item("c_test_insert")?["status"] == "unknownCellType")
            #expect(item("show_infrared_gateway_sub_device")?["status"] == "notApplicable")
            #expect(item("check_device_network")?["status"] == "ok", "\(String(describing: item("check_device_network")))")
            #expect(item("check_device_network")?["data"]?["latencyMs"]?.int64Value != nil)
            #expect(item("check_device_network")?["data"]?["quality"] == "good")
            #expect(item("check_firmware_update")?["data"]?["current"] == "1.4.2")
            #expect(item("footer")?["data"]?["action"] == "remove")

            let hub = try await harness.cli(["detail", "gw01", "--json", "--detail-config", config, "--timeout", "0.5"])
            #expect(hub.status == 0, "\(hub.stderr)")
            let hubPage = try JSONParser.parse(hub.stdout)
            let hubItems = hubPage["sections"]?.arrayValue?.compactMap { $0["items"]?.arrayValue }.joined()
            let subDevices = hubItems?.first { $0["cellType"] == "show_infrared_gateway_sub_device" }
            #expect(subDevices?["status"] == "ok")
            #expect(subDevices?["data"]?["subDevices"]?[0]?["devId"] == "bulb3")
            // The gateway does not answer info/get: the live check fails, and says so.
            #expect(hubItems?.first { $0["cellType"] == "check_device_network" }?["status"] == "failed")

            let text = try await harness.cli(["detail", "bulb3", "--detail-config", config])
            #expect(text.stdout.contains("[offLineWarnSection] Offline notification"))
            #expect(text.stdout.contains("notAvailableHere"))
            answering.cancel()
            await gateway.disconnect()
            await light.disconnect()
        }
    }
}
