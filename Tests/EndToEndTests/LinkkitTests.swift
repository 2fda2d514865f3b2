import Foundation
import JSON
import Testing
import TestSupport

/// The Alink dialect against Alibaba's own device SDK (Linkkit, from PyPI, pinned) as the devices, the real
/// daemon and a real broker: what a team with Linkkit devices would check first.
@Suite("Alink: Linkkit devices and the daemon", .serialized)
struct LinkkitTests {
    static let dialects = ["THING_AGENT_DIALECTS": "native,alink"]

    /// A models directory with the product's TSL file, as Alibaba's platform exports it.
    static func models(_ directory: String) throws -> String {
        let models = directory + "/models"
        try FileManager.default.createDirectory(atPath: models, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: repositoryRoot() + "/Tests/Interop/linkkit/a1PK.tsl.json",
                                        toPath: models + "/a1PK.json")
        return models
    }

    @Test(.timeLimit(.minutes(3)))
    func postsAreCachedAndAnsweredASetReachesTheDeviceAndRestartsLoseNothing() async throws {
        try await withBroker { broker in
            let scratch = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            // A catalog with a newer image for the product: what the device's own firmware query is answered with.
            let catalog = scratch + "/firmware.json"
            try #"{"a1PK":{"version":"1.3.0","url":"http://127.0.0.1:9/fw-1.3.0.bin","sha256":"\#(String(repeating: "ab", count: 32))","size":4096}}"#
                .write(toFile: catalog, atomically: true, encoding: .utf8)
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects.merging(
                ["THING_AGENT_MODELS": try Self.models(scratch), "THING_AGENT_FIRMWARE_CATALOG": catalog]) { $1 })
            try await harness.startDaemon()
            let lamp = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "lamp1", flags: [
                "--post-on-ready", #"{"switch_1":1,"bright":40}"#, "--follow-sets", "--ntp-on-ready",
                "--services", "reboot", "--auto-answer",
            ], logPath: harness.directory + "/lamp1.out")

            // The post is answered as the SDK wants it (else it would drop the reply), and cached.
            try await lamp.waitFor("post reply") { $0["ev"] == "prop_post_reply" && $0["code"] == 200 }
            let info = try await harness.waitForInfo("a1PK.lamp1") { $0["properties"]?["bright"] == 40 }
            #expect(info["online"] == true && info["presence"] == "traffic", "online on the evidence of its own traffic: \(info)")
            #expect(info["productId"] == "a1PK", "its product key is its product")
            // The NTP request is answered with the three times.
            let ntp = try await lamp.waitFor("NTP response") { $0["topic"] == "/ext/ntp/a1PK/lamp1/response" }
            #expect(ntp["payload"]?["serverRecvTime"]?.stringValue != nil, "\(ntp)")

            // Its firmware version is kept; an event and a tag change are answered as the SDK wants.
            try lamp.send(#"{"cmd":"ota_inform","version":"1.2.0"}"#)
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["firmwareVersion"] == "1.2.0" }
            try lamp.send(#"{"cmd":"event","id":"alarm","params":{"level":2}}"#)
            try await lamp.waitFor("event reply") { $0["ev"] == "event_post_reply" && $0["code"] == 200 }
            try lamp.send(#"{"cmd":"tags_update","tags":{"room":"lab","rack":"3"}}"#)
            try await lamp.waitFor("tags reply") { $0["ev"] == "deviceinfo_update_reply" && $0["code"] == 200 }
            // Both kept: the event as the latest of its name, the tags in the device's information.
            let kept = try await harness.waitForInfo("a1PK.lamp1") {
                $0["events"]?["alarm"]?["params"]?["level"] == 2 && $0["tags"]?["rack"] == "3"
            }
            #expect(kept["tags"] == .object(["room": "lab", "rack": "3"]), "\(kept)")
            try lamp.send(#"{"cmd":"tags_delete","keys":["rack"]}"#)
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["tags"] == .object(["room": "lab"]) }
            let text = try await harness.cli(["info", "a1PK.lamp1"])
            #expect(text.stdout.contains("alarm") && text.stdout.contains("on the evidence of its own traffic"),
                    "\(text.stdout)")
            // The device asks for its firmware: the catalog's newer image for its product, as the SDK takes it.
            try lamp.send(#"{"cmd":"ota_get"}"#)
            let offered = try await lamp.waitFor("the firmware answer") { $0["ev"] == "ota" && $0["notice_type"] == 2 }
            #expect(offered["version"] == "1.3.0" && offered["url"] == "http://127.0.0.1:9/fw-1.3.0.bin", "\(offered)")

            // A service is an action: the SDK hands it to the device, which answers with its output.
            let action = try await harness.cli(["action", "a1PK.lamp1", "reboot", "delay=1"])
            #expect(action.status == 0, "\(action.stdout) \(action.stderr)")
            #expect(action.stdout.contains("echo = {\"delay\":1}"), "\(action.stdout)")

            // ... and actions: an unknown service or a parameter out of its range is refused before anything is sent.
            let unknown = try await harness.cli(["action", "a1PK.lamp1", "explode"])
            #expect(unknown.status == 3 && unknown.stderr.contains("unknown action"), "\(unknown.stdout) \(unknown.stderr)")
            let late = try await harness.cli(["action", "a1PK.lamp1", "reboot", "delay=61"])
            #expect(late.status == 3 && late.stderr.contains("above the maximum 60"), "\(late.stdout) \(late.stderr)")
            #expect(!lamp.events.contains { $0["ev"] == "service" && $0["id"] == "explode" })

            // The product's TSL model checks sets before anything is sent.
            let tooBright = try await harness.cli(["set", "a1PK.lamp1", "bright=500"])
            #expect(tooBright.status == 3, "\(tooBright.stdout) \(tooBright.stderr)")
            #expect(tooBright.stderr.contains("above the maximum 100"), "\(tooBright.stderr)")
            // A set through the CLI (and the daemon): the SDK answers 200, the device posts the value.
            let set = try await harness.cli(["set", "a1PK.lamp1", "bright=70"])
            #expect(set.status == 0, "\(set.stdout) \(set.stderr)")
            #expect(set.stdout.contains("applied"), "\(set.stdout)")
            try await lamp.waitFor("the set") { $0["ev"] == "prop_set" && $0["params"]?["bright"] == 70 }
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["properties"]?["bright"] == 70 }

            // The device restarts: its ids start at "1" again, and its posts are still taken.
            await lamp.stop()
            let again = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "lamp1", flags: [
                "--post-on-ready", #"{"bright":41}"#,
            ], logPath: harness.directory + "/lamp1-again.out")
            try await again.waitFor("post reply") { $0["ev"] == "prop_post_reply" && $0["request_id"] == "1" }
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["properties"]?["bright"] == 41 }

            // The agent restarts: the device is there at once, before it speaks again.
            try await harness.stopDaemon()
            try await harness.startDaemon()
            let restarted = try #require(try await harness.info("a1PK.lamp1"))
            #expect(restarted["properties"]?["bright"] == 41)
            await again.stop()
        }
    }

    /// A Linkkit gateway adds its sub-device to its topology and logs it in (the SDK's own API, each answered as the
    /// SDK wants), then posts for it on the sub-device's own topics: the sub-device is cached, online and linked to
    /// its gateway; a set reaches it through the gateway; a logout takes it offline.
    @Test(.timeLimit(.minutes(3)))
    func aGatewaysSubDeviceIsLinkedOnlineAndReachableAndALogoutTakesItOffline() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects)
            try await harness.startDaemon()
            let gateway = try await LinkkitDevice(broker, productKey: "a1GW", deviceName: "gw1", flags: [
                "a1SUB", "sub1", "secret-sub1", "--auto-login", "--sub-post-on-login", #"{"temp":20.5}"#,
            ], logPath: harness.directory + "/gw1.out", script: "linkkit_gateway.py")
            try await gateway.waitFor("topo add reply") { $0["ev"] == "topo_add_reply" && $0["code"] == 200 }
            try await gateway.waitFor("login reply") { $0["ev"] == "login_reply" && $0["code"] == 200 }
            let sub = try await harness.waitForInfo("a1SUB.sub1") { $0["properties"]?["temp"] == 20.5 }
            #expect(sub["gatewayId"] == "a1GW.gw1" && sub["online"] == true, "\(sub)")
            #expect(try await harness.info("a1GW.gw1")?["online"] == true)
            #expect(sub["presence"] == "session" || sub["presence"] == "traffic", "its gateway's word or its own posts: \(sub)")
            // The gateway asks for its topology: the agent answers with the sub-devices linked to it.
            try gateway.send(#"{"cmd":"topo_get"}"#)
            let topology = try await gateway.waitFor("topology") { $0["ev"] == "topo_get_reply" }
            #expect(topology["payload"]?["data"] == .array([.object(["productKey": "a1SUB", "deviceName": "sub1"])]),
                    "\(topology)")
            #expect(topology["payload"]?["code"] == 200)
            // A sub-device's event, posted by its gateway on the sub-device's own topic.
            try gateway.send(#"{"cmd":"sub_event","id":"alarm","params":{"level":3}}"#)
            _ = try await harness.waitForInfo("a1SUB.sub1") { $0["events"]?["alarm"]?["params"]?["level"] == 3 }

            let set = try await harness.cli(["set", "a1SUB.sub1", "temp=22"])
            #expect(set.status == 0, "\(set.stdout) \(set.stderr)")
            try await gateway.waitFor("the sub-device's set") { $0["ev"] == "sub_prop_set" && $0["params"]?["temp"] == 22 }

            try gateway.send(#"{"cmd":"logout"}"#)
            try await gateway.waitFor("logout reply") { $0["ev"] == "logout_reply" && $0["code"] == 200 }
            _ = try await harness.waitForInfo("a1SUB.sub1") { $0["online"] == false }
            await gateway.stop()
        }
    }

    /// A Linkkit device announces nothing; with the broker's client events on (`log_dest topic`, as
    /// deploy/mosquitto.conf has it), its connection is evidence that it is online before it says anything, and its
    /// end that it is offline.
    @Test(.timeLimit(.minutes(2)))
    func theBrokersClientEventsSayWhenADeviceComesAndGoes() async throws {
        var options = MosquittoBroker.Options()
        options.extraConfig = "log_dest topic\n"
        try await withBroker(options) { broker in
            // A short grace period: the offline warning follows the broker's word as for any device.
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects.merging(
                ["THING_AGENT_OFFLINE_GRACE": "1"]) { $1 })
            try await harness.startDaemon()
            let warnings = try await TopicRecorder.start(broker.url, filter: "thing-agent/events/a1PK.quiet1/offline")
            let quiet = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "quiet1", flags: [],
                                                logPath: harness.directory + "/quiet1.out")
            try await quiet.waitFor("subscribed") { $0["ev"] == "ready" }
            let info = try await harness.waitForInfo("a1PK.quiet1") { $0["online"] == true }
            #expect(info["properties"]?.objectValue?.isEmpty != false, "it has said nothing: \(info)")
            #expect(info["presence"] == "broker", "known by the broker's client events: \(info)")
            await quiet.stop()
            let gone = try await harness.waitForInfo("a1PK.quiet1") { $0["online"] == false }
            #expect(gone["presence"] == "broker")
            let warning = try await warnings.waitFor(count: 1, timeout: .seconds(15))
            #expect(try JSONParser.parse(try #require(warning.first).payload)["event"] == "offline")
            await warnings.stop()
        }
    }

    /// `ota` to a Linkkit device: the push carries what the SDK needs, the device downloads the image from a local
    /// HTTP server and checks its SHA-256 with the SDK's own code, reports its progress and then its new version,
    /// and the command ends with the upgrade succeeded.
    @Test(.timeLimit(.minutes(3)))
    func aFirmwareUpgradeReachesALinkkitDeviceAndEndsWhenItReportsTheVersion() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects)
            try await harness.startDaemon()
            let site = harness.directory + "/firmware"
            try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
            let image = Array((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try Data(image).write(to: URL(fileURLWithPath: site + "/fw-1.3.0.bin"))
            let port = try freeLoopbackPort()
            defer { releaseLoopbackPort(port) }
            let server = try DaemonProcess("/usr/bin/python3", ["-m", "http.server", "\(port)", "--bind", "127.0.0.1",
                                                                "--directory", site],
                                           logPath: harness.directory + "/http.log")
            defer { server.signal(SIGKILL) }
            // Our server, listening and serving the image, before anything asks it (python takes a while to start).
            try await waitUntil(timeout: .seconds(30)) {
                (try? httpRequest(port: port, path: "/fw-1.3.0.bin"))?.status == 200
            }
            let lamp = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "lamp1", flags: [
                "--post-on-ready", #"{"bright":40}"#, "--ota-auto",
            ], logPath: harness.directory + "/lamp1.out")
            try await lamp.waitFor("post reply") { $0["ev"] == "prop_post_reply" }
            try lamp.send(#"{"cmd":"ota_inform","version":"1.2.0"}"#)
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["firmwareVersion"] == "1.2.0" }
            let sha256 = try await runCommand("/usr/bin/sha256sum", [site + "/fw-1.3.0.bin"]).stdout.prefix(64)
            let ota: ProcessResult
            do {
                ota = try await harness.cli([
                    "ota", "a1PK.lamp1", "--version", "1.3.0", "--url", "http://127.0.0.1:\(port)/fw-1.3.0.bin",
                    "--sha256", String(sha256), "--size", "\(image.count)", "--timeout", "45",
                ], timeout: .seconds(60))
            } catch {
                let logs = "device:\n\(lamp.process.log)\nhttp:\n\(server.log)\ndaemon:\n\(harness.daemon?.log ?? "")"
                Issue.record("ota did not end: \(error)\n\(logs)")
                throw error
            }
            #expect(ota.status == 0, "\(ota.stdout) \(ota.stderr)\n\(lamp.process.log)")
            #expect(lamp.events.contains { $0["ev"] == "ota_download" && $0["rc"]?.stringValue?.hasSuffix("SUCCESS") == true }, "\(lamp.process.log)")
            let info = try #require(try await harness.info("a1PK.lamp1"))
            #expect(info["firmwareVersion"] == "1.3.0")
            #expect(info["upgrade"]?["stage"] == "succeeded", "\(info)")
            await lamp.stop()
        }
    }

    /// A Linkkit device paired as an Alink device (`pair --dialect alink`) on the dynamic-security plugin: the SDK
    /// takes the credentials its activation gave it as they are (user name, client id, password), posts and hears
    /// its reply, and a set reaches it, all under the role that names its own Alink topics.
    @Test(.timeLimit(.minutes(3)))
    func aLinkkitDevicePairedAsAlinkConnectsWithWhatItsActivationGaveIt() async throws {
        var options = MosquittoBroker.Options()
        options.dynamicSecurity = ("thing-agent", PairCommandTests.agentPassword)
        try await withBroker(options) { broker in
            try await PairCommandTests.ctrl(broker, ["createClient", "thing-agent-cli", "-p", PairCommandTests.cliPassword])
            let scratch = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects.merging([
                "THING_AGENT_MODELS": try Self.models(scratch), "THING_AGENT_PROVISIONING": "true",
                "THING_AGENT_USERNAME": "thing-agent", "THING_AGENT_PASSWORD": PairCommandTests.agentPassword,
            ]) { $1 })
            try await harness.startDaemon()
            let made = try JSONParser.parse(try await harness.cli(["pair", "--dialect", "alink", "--json"]
                                                                  + PairCommandTests.cliUser).stdout)
            let answer = try await PairCommandTests.activate(
                broker, user: try #require(made["username"]?.stringValue), password: try #require(made["password"]?.stringValue),
                token: try #require(made["token"]?.stringValue), device: "a1PK.lamp1", productId: "a1PK",
                in: harness.directory)
            let given = try #require(answer["data"]?.objectValue, "\(answer)")
            let lamp = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "lamp1", flags: [
                "--username", try #require(given["username"]?.stringValue),
                "--client-id", try #require(given["clientId"]?.stringValue),
                "--password", try #require(given["password"]?.stringValue),
                "--post-on-ready", #"{"switch_1":1,"bright":40}"#, "--follow-sets",
            ], logPath: harness.directory + "/lamp1.out")
            try await lamp.waitFor("post reply") { $0["ev"] == "prop_post_reply" && $0["code"] == 200 }
            let info = try await harness.waitForInfo("a1PK.lamp1") { $0["properties"]?["bright"] == 40 }
            #expect(info["name"] == "Desk lamp" && info["productId"] == "a1PK", "\(info)")
            let set = try await harness.cli(["set", "a1PK.lamp1", "bright=70"] + PairCommandTests.cliUser)
            #expect(set.status == 0, "\(set.stdout) \(set.stderr)")
            try await lamp.waitFor("the set") { $0["ev"] == "prop_set" && $0["params"]?["bright"] == 70 }
            _ = try await harness.waitForInfo("a1PK.lamp1") { $0["properties"]?["bright"] == 70 }
            await lamp.stop()
        }
    }

    /// A device name outside the id rule is refused and counted, and never reaches the cache.
    @Test(.timeLimit(.minutes(2)))
    func aDeviceNameOutsideTheIdRuleIsCountedAndDropped() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: Self.dialects)
            try await harness.startDaemon()
            let odd = try await LinkkitDevice(broker, productKey: "a1PK", deviceName: "user@home", flags: [
                "--post-on-ready", #"{"bright":1}"#,
            ], logPath: harness.directory + "/odd.out")
            try await odd.waitFor("post result") { $0["ev"] == "result" && $0["cmd"] == "post" }
            try await waitUntil(timeout: .seconds(15)) {
                let stats = try? await harness.stats()
                return stats?["dropped"]?["invalidDeviceID"]?.int64Value ?? 0 >= 1
            }
            #expect(try await harness.info("a1PK.user@home") == nil)
            await odd.stop()
        }
    }
}
