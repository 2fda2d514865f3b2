import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// Input that once crashed, froze or steered the daemon (docs/faults.md, "Hostile input"): the real daemon, a
/// real mosquitto, the cache file read back by the CLI.
@Suite("Faults: input that must not crash, freeze or steer the agent", .serialized)
struct InputGuardTests {
    /// `thing-agent stats --json`'s `guarded` counter.
    static func guarded(_ harness: AgentHarness, _ reason: String) async throws -> Int64 {
        try await harness.stats()["guarded"]?[reason]?.int64Value ?? 0
    }

    static func waitForGuarded(_ harness: AgentHarness, _ reason: String, atLeast count: Int64) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while try await guarded(harness, reason) < count {
            guard ContinuousClock.now < deadline else {
                throw TestSupportError("stats never counted \(count) \(reason): \(try await harness.stats())")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    // MARK: numbers

    /// The probe's one message: a retained `set` with `"timeout":-1e300` ended the daemon at every start. A
    /// retained request is now refused unrun (the broker replays it at every start); the same request sent live
    /// is a bad request.
    @Test(.timeLimit(.minutes(2)))
    func aRetainedRequestIsNeitherRunNorAnsweredAtStartAndTheSameRequestLiveIsABadRequest() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let service = try await APIService(harness, name: "svc")
            func request(_ id: String) -> String {
                """
                {"id":"\(id)","device":"zz1","data":{"switch_1":true},"timeout":-1e300,"force":true,\
                "replyTo":"\(service.replyTopic(id))"}
                """
            }
            // Kept by the broker before the daemon runs: its subscription at start brings it, flagged retained.
            try await service.send("set", request("kept"), retain: true)
            try await harness.startDaemon()
            try await Self.waitForGuarded(harness, "apiRetainedRefused", atLeast: 1)
            #expect(harness.daemon?.isRunning == true)

            try await service.send("set", request("live"))
            let live = try await service.answer(on: service.replyTopic("live"))
            #expect(live["code"] == 400)
            #expect(live["message"]?.stringValue?.contains("timeout") == true)
            #expect(!service.messages.contains { $0.topic == service.replyTopic("kept") },
                    "the retained request was answered")
            #expect(harness.daemon?.isRunning == true)
            try await service.send("set", "", retain: true)  // clears the retained request
            await service.disconnect()
        }
    }

    /// Numbers in the config file and on the command line that would trap are clear errors (exit 2).
    @Test(.timeLimit(.minutes(2)))
    func hostileNumbersInTheConfigFileAndFlagsAreClearErrors() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            for (index, file) in HostileCorpus.configFiles.enumerated() {
                let path = harness.directory + "/hostile-\(index).json"
                try Data(file.text.utf8).write(to: URL(fileURLWithPath: path))
                let run = try await harness.cli(["run", "--config", path])
                #expect(run.status == 2, "\(file.text): \(run.status) \(run.stderr)")
                #expect(run.stderr.contains(": \(file.key): invalid value"), "\(file.text): \(run.stderr)")
            }
            for arguments in HostileCorpus.flags {
                let result = try await harness.cli(arguments)
                #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
                #expect(result.stderr.contains("seconds"), "\(arguments): \(result.stderr)")
            }
        }
    }

    /// A thing model (a `--models` file) whose value range spans all of Int64: the simulator's arithmetic on it
    /// trapped (`max - min`).
    @Test(.timeLimit(.minutes(2)))
    func theSimulatorTakesAModelWithTheWholeInt64Range() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let models = harness.directory + "/models"
            try FileManager.default.createDirectory(atPath: models, withIntermediateDirectories: true)
            try Data("""
                {"productId":"p-light-1","properties":[
                  {"code":"bright_value","type":"value","min":-9223372036854775808,"max":9223372036854775807,"step":3,"access":"rw"},
                  {"code":"temp_current","type":"value","min":-9223372036854775808,"max":9223372036854775807,"access":"ro"},
                  {"code":"uptime","type":"value","min":0,"max":9223372036854775807,"access":"ro"}]}
                """.utf8).write(to: URL(fileURLWithPath: models + "/p-light-1.json"))
            let result = try await runCommand(thingAgentExecutable(), [
                "simulate", "--broker", broker.url, "--devices", "2", "--gateways", "0", "--models", models,
                "--seed", "7", "--duration", "1.5", "--report-interval", "0.1", "--signal-interval", "0"])
            #expect(result.status == 0, "\(result.status): \(result.stderr)")
        }
    }

    /// Every hostile API request gets its answer (400, 404 or a page), and the daemon keeps answering.
    @Test(.timeLimit(.minutes(3)))
    func hostileAPIRequestsGetClearErrorsAndTheDaemonKeepsAnswering() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_API_RATE_LIMIT": "0"])
            try await harness.startDaemon()
            let device = try SimulatedDevice("plug1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("plug1") { $0["online"] == true }
            let service = try await APIService(harness, name: "corpus")
            for (index, entry) in HostileCorpus.apiRequests.enumerated() {
                let topic = service.replyTopic("\(index)")
                try await service.send(entry.method, entry.payload, responseTopic: topic)
                let answer = try await service.answer(on: topic)
                #expect(answer["code"]?.int64Value == Int64(entry.code), "\(entry.method) \(entry.payload): \(answer)")
                #expect(harness.daemon?.isRunning == true, "\(entry.method) \(entry.payload)")
            }
            let info = try await service.call("info", id: "after", #""device":"plug1""#)
            #expect(info["code"] == 0)
            #expect(info["data"]?["online"] == true)
            await service.disconnect()
            await device.disconnect()
        }
    }

    // MARK: where answers go

    /// A reply topic outside `thing-agent/replies/` made the agent publish a device's unbind (and into the event
    /// feed, and onto its own status): refused, counted, nothing published.
    @Test(.timeLimit(.minutes(2)))
    func repliesOnlyGoUnderTheReplyPrefix() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let devB = try SimulatedDevice("devB", brokerURL: broker.url)
            try await devB.connect()
            try await devB.status(true, time: t0)
            _ = try await harness.waitForInfo("devB") { $0["online"] == true }
            let forbidden = ["things/devB/thing/unbind", "thing-agent/events/devB/injected",
                             "thing-agent/agents/\(harness.clientID)/status", "thing-agent/repliesX/svc"]
            let service = try await APIService(harness, name: "svc", watching: forbidden)
            try await service.send("info", #"{"id":"r1","device":"devB","replyTo":"things/devB/thing/unbind"}"#)
            try await service.send("info", #"{"id":"r2","device":"devB"}"#, responseTopic: forbidden[1])
            try await service.send("info", #"{"id":"r3","device":"devB"}"#, responseTopic: forbidden[2])
            try await service.send("info", #"{"id":"r4","device":"devB","replyTo":"thing-agent/repliesX/svc"}"#)
            // Answered in order: once this one is here, the four before it were dealt with.
            let allowed = try await service.call("info", id: "r5", #""device":"devB""#)
            #expect(allowed["code"] == 0)
            try await Self.waitForGuarded(harness, "apiReplyRefused", atLeast: 4)
            let published = service.messages.filter { forbidden.contains($0.topic) && !$0.retain }
            #expect(published.isEmpty, "\(published.map(\.topic))")
            #expect(try await harness.info("devB") != nil, "devB is still there")
            #expect(harness.daemon?.log.contains("outside the reply prefix") == true)
            await service.disconnect()
            await devB.disconnect()
        }
    }

    /// One short `devices` request answered every device at once (12 MB for 10k): it is paged.
    @Test(.timeLimit(.minutes(2)))
    func devicesArePagedInIdOrder() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_API_PAGE_SIZE": "3"])
            try await harness.startDaemon()
            let publisher = try SimulatedDevice("publisher", brokerURL: broker.url)
            try await publisher.connect()
            for id in ["d5", "d1", "d4", "d2", "d3"] {
                try await publisher.client.publish("things/\(id)/thing/status", #"{"time":\#(t0),"status":"online"}"#)
            }
            let service = try await APIService(harness, name: "svc")
            try await waitUntil(timeout: .seconds(20)) {
                let stats = try? await harness.stats()
                return stats?["applied"]?.int64Value ?? 0 >= 5
            }
            let first = try await service.call("devices", id: "p1", #""limit":2"#)
            #expect(first["data"]?.arrayValue?.map { $0["devId"] } == ["d1", "d2"])
            #expect(first["next"] == "d2")
            let second = try await service.call("devices", id: "p2", #""limit":2,"after":"d2""#)
            #expect(second["data"]?.arrayValue?.map { $0["devId"] } == ["d3", "d4"])
            let last = try await service.call("devices", id: "p3", #""limit":2,"after":"d4""#)
            #expect(last["data"]?.arrayValue?.map { $0["devId"] } == ["d5"])
            #expect(last["next"] == .null)
            let byDefault = try await service.call("devices", id: "p4")
            #expect(byDefault["data"]?.arrayValue?.count == 3, "apiPageSize")
            #expect(byDefault["next"] == "d3")
            let tooBig = try await service.call("devices", id: "p5", #""limit":1000000"#)
            #expect(tooBig["code"] == 400)
            await service.disconnect()
            await publisher.disconnect()
        }
    }

    /// Requests over a client's rate are answered 429; another client is not held up by it.
    @Test(.timeLimit(.minutes(2)))
    func aClientOverItsRateIsAnswered429() async throws {
        try await withBroker { broker in
            // One request per 100 s: the second of a pair is over the rate however slow the machine.
            let harness = try AgentHarness(broker: broker, daemonEnvironment: ["THING_AGENT_API_RATE_LIMIT": "0.01"])
            try await harness.startDaemon()
            let busy = try await APIService(harness, name: "busy")
            let other = try await APIService(harness, name: "other")
            let first = try await busy.call("devices", id: "b1")
            #expect(first["code"] == 0)
            let second = try await busy.call("devices", id: "b2")
            #expect(second["code"] == 429)
            #expect(second["message"]?.stringValue?.contains("too many requests") == true)
            let elsewhere = try await other.call("devices", id: "o1")
            #expect(elsewhere["code"] == 0)
            try await Self.waitForGuarded(harness, "apiRateLimited", atLeast: 1)
            await busy.disconnect()
            await other.disconnect()
        }
    }

    /// The client is the name a request gives itself: a requester that makes up a new name for each request still
    /// meets the budget of all clients together.
    @Test(.timeLimit(.minutes(2)))
    func madeUpClientNamesStillMeetTheTotalRate() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_API_RATE_LIMIT": "1000", "THING_AGENT_API_RATE_LIMIT_TOTAL": "0.01",
            ])
            try await harness.startDaemon()
            let first = try await APIService(harness, name: "rotating-1")
            let second = try await APIService(harness, name: "rotating-2")
            #expect(try await first.call("devices", id: "r1")["code"] == 0)
            let over = try await second.call("devices", id: "r2")
            #expect(over["code"] == 429)
            #expect(over["message"]?.stringValue?.contains("in all") == true, "\(over)")
            try await Self.waitForGuarded(harness, "apiRateLimited", atLeast: 1)
            await first.disconnect()
            await second.disconnect()
        }
    }

    // MARK: clocks

    /// `{"time":99999999999999,"status":"online"}` made every later offline stale; the same for properties.
    @Test(.timeLimit(.minutes(2)))
    func aTimeFarAheadNeitherFreezesAValueNorHidesTheNextOne() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("clock1", brokerURL: broker.url)
            try await device.connect()
            let future: Int64 = 99_999_999_999_999
            try await device.status(true, time: future)
            try await device.properties(#"{"switch_1":true}"#, time: future)
            try await device.signal(wifi: -40, time: future)
            _ = try await harness.waitForInfo("clock1") { $0["properties"]?["switch_1"] == true }
            let now = Timestamp.current + 1000
            try await device.status(false, time: now)
            try await device.properties(#"{"switch_1":false}"#, time: now)
            try await device.signal(wifi: -70, time: now)
            let info = try await harness.waitForInfo("clock1") {
                $0["online"] == false && $0["properties"]?["switch_1"] == false && $0["wifiSignal"] == -70
            }
            #expect(info["statusTime"]?.int64Value ?? 0 < future)
            try await Self.waitForGuarded(harness, "clockSkew", atLeast: 3)
            await device.disconnect()
        }
    }

    // MARK: bounds

    /// One device with thousands of codes stalled every device: codes are bounded per device, devices per cache.
    @Test(.timeLimit(.minutes(2)))
    func propertiesPerDeviceAndDevicesPerCacheAreBounded() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker, daemonEnvironment: [
                "THING_AGENT_MAX_PROPERTIES": "5", "THING_AGENT_MAX_DEVICES": "3"])
            try await harness.startDaemon()
            let device = try SimulatedDevice("many", brokerURL: broker.url)
            try await device.connect()
            let codes = (0..<8).map { #""c\#($0)":\#($0)"# }.joined(separator: ",")
            try await device.properties("{\(codes)}", time: t0)
            let kept = try await harness.waitForInfo("many") { $0["properties"]?.objectValue?.count == 5 }
            #expect(kept["properties"]?["c0"] == 0)
            // A known code still updates; a new one is refused again (and not logged again).
            try await device.properties(#"{"c0":100,"extra":1}"#, time: t0 + 1)
            let updated = try await harness.waitForInfo("many") { $0["properties"]?["c0"] == 100 }
            #expect(updated["properties"]?["extra"] == nil)
            try await Self.waitForGuarded(harness, "propertyLimit", atLeast: 2)
            let log = harness.daemon?.log ?? ""
            #expect(log.components(separatedBy: "more property codes than maxPropertiesPerDevice").count == 2, "\(log)")

            let publisher = try SimulatedDevice("publisher", brokerURL: broker.url)
            try await publisher.connect()
            for id in ["n1", "n2", "n3"] {
                try await publisher.client.publish("things/\(id)/thing/status", #"{"time":\#(t0),"status":"online"}"#)
            }
            try await waitUntil(timeout: .seconds(20)) {
                let stats = try? await harness.stats()
                return stats?["dropped"]?["deviceLimit"]?.int64Value ?? 0 >= 1
            }
            let listed = try await harness.cli(["devices", "--json"])
            #expect(try JSONParser.parse(listed.stdout).arrayValue?.count == 3)
            #expect(harness.daemon?.log.contains("maxDevices") == true)
            await device.disconnect()
            await publisher.disconnect()
        }
    }

    /// A SIGTERM while a big cache loads ends the daemon then, not after the load (a restart took 167 s).
    @Test(.timeLimit(.minutes(5)))
    func aStopDuringStartUpEndsTheDaemonBeforeTheCacheIsUp() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            harness.daemon?.signal(SIGTERM)
            #expect(await harness.daemon?.waitForExit(timeout: .seconds(30)) == 0)
            // Enough devices that loading them takes a while on any machine.
            let sql = """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600000)
                INSERT INTO devices (dev_id, name, first_seen, updated_at) SELECT 'dev' || i, 'Device ' || i, 0, 0 FROM n;
                INSERT INTO properties (dev_id, code, value, time) SELECT dev_id, 'switch_1', 'true', 0 FROM devices;
                """
            let filled = try await runCommand("/usr/bin/sqlite3", ["-bail", harness.database, sql], timeout: .seconds(120))
            #expect(filled.status == 0, "\(filled.stderr)")
            let daemon = try DaemonProcess(thingAgentExecutable(), ["run"] + harness.commonArguments,
                                           logPath: harness.directory + "/restart.log")
            try await waitUntil(timeout: .seconds(30)) { daemon.log.contains("loading the cache") || !daemon.isRunning }
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: .seconds(120)) == 0)
            #expect(daemon.log.contains("stopped during start-up"), "\(daemon.log)")
            #expect(!daemon.log.contains("cache loaded"), "\(daemon.log)")
            let count = try await sqlite3(harness.database, "SELECT count(*) FROM devices")
            #expect(count == "600000", "nothing lost or written")
        }
    }

    // MARK: transfers

    /// A `finish` for a transfer nobody started, from a gateway nobody knows, moved the faulty gateway's
    /// sub-devices to it. Only a transfer this agent started, or an eligible gateway with
    /// `trustForeignTransfers`, moves them.
    @Test(.timeLimit(.minutes(2)))
    func onlyTrustedTransfersMoveSubDevices() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let publisher = try SimulatedDevice("publisher", brokerURL: broker.url)
            try await publisher.connect()
            func info(_ id: String, _ data: String) async throws {
                try await publisher.client.publish("things/\(id)/thing/info", #"{"time":\#(t0),"data":\#(data)}"#)
            }
            func report(from gateway: String, status: Int, time: Int64) async throws {
                try await publisher.client.publish("things/\(gateway)/thing/gateway/transfer/status", """
                    {"time":\(time),"data":{"targetDeviceId":"gwOld","sourceDeviceId":"\(gateway)","status":\(status),"failedCode":""}}
                    """)
            }
            let gateway = #""category":"gateway","productId":"p-gw","spaceId":7,"abilities":["gatewayTransfer"]"#
            try await info("gwOld", "{\(gateway)}")
            try await info("gwNew", "{\(gateway)}")
            try await info("rogue", #"{"category":"gateway","productId":"p-other","spaceId":7,"abilities":["gatewayTransfer"]}"#)
            for sub in ["sub1", "sub2"] { try await info(sub, #"{"category":"subdevice","gatewayId":"gwOld"}"#) }
            _ = try await harness.waitForInfo("sub2") { $0["gatewayId"] == "gwOld" }
            _ = try await harness.waitForInfo("rogue") { $0["productId"] == "p-other" }

            try await report(from: "rogue", status: 4, time: t0 + 10)
            try await report(from: "gwNew", status: 4, time: t0 + 10)
            try await Self.waitForGuarded(harness, "untrustedTransfer", atLeast: 2)
            for sub in ["sub1", "sub2"] { #expect(try await harness.info(sub)?["gatewayId"] == "gwOld") }
            #expect(harness.daemon?.log.contains("did not start; no sub-device moved") == true)

            // Transfers started elsewhere, trusted from an eligible gateway only (each runs again: a repeated
            // finish changes nothing).
            harness.daemon?.signal(SIGTERM)
            #expect(await harness.daemon?.waitForExit(timeout: .seconds(30)) == 0)
            try await harness.startDaemon(environment: ["THING_AGENT_TRUST_FOREIGN_TRANSFERS": "true"])
            try await report(from: "rogue", status: 1, time: t0 + 20)
            try await report(from: "rogue", status: 4, time: t0 + 21)
            try await Self.waitForGuarded(harness, "untrustedTransfer", atLeast: 1)
            for sub in ["sub1", "sub2"] { #expect(try await harness.info(sub)?["gatewayId"] == "gwOld") }
            try await report(from: "gwNew", status: 1, time: t0 + 20)
            try await report(from: "gwNew", status: 4, time: t0 + 21)
            _ = try await harness.waitForInfo("sub1") { $0["gatewayId"] == "gwNew" }
            _ = try await harness.waitForInfo("sub2") { $0["gatewayId"] == "gwNew" }
            await publisher.disconnect()
        }
    }

    // MARK: terminal output

    /// A `name` with ESC sequences recoloured the terminal, set its title and overwrote lines.
    @Test(.timeLimit(.minutes(2)))
    func deviceStringsReachTheTerminalEscapedAndJSONExact() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let device = try SimulatedDevice("esc1", brokerURL: broker.url)
            try await device.connect()
            let name = "Hall \u{1B}]0;owned\u{07}\u{1B}[2J\u{1B}[31mlight\r\u{9B}1A"
            let nameJSON = String(decoding: JSONValue.string(name).serializedBytes(), as: UTF8.self)
            try await device.info(#"{"name":\#(nameJSON),"category":"gateway","productId":"p","spaceId":1}"#, time: t0)
            try await device.properties(#"{"\u001b[1mcode":"\u001b[5mblink"}"#, time: t0)
            let exact = try await harness.waitForInfo("esc1") { $0["name"]?.stringValue == name }
            #expect(exact["properties"]?["\u{1B}[1mcode"] == .string("\u{1B}[5mblink"))
            for arguments in [["devices"], ["info", "esc1"], ["gateways", "esc1"]] {
                let result = try await harness.cli(arguments)
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                let controls = result.stdout.unicodeScalars.filter {
                    $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value)
                }
                #expect(controls.isEmpty, "\(arguments): \(result.stdout.debugDescription)")
            }
            let info = try await harness.cli(["info", "esc1"])
            #expect(info.stdout.contains(#"Hall \u{1B}]0;owned\u{7}\u{1B}[2J\u{1B}[31mlight\u{D}\u{9B}1A"#), "\(info.stdout)")
            #expect(info.stdout.contains(#"\u{1B}[1mcode"#))
            await device.disconnect()
        }
    }
}
