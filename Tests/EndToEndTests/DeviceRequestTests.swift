import Foundation
import JSON
import Testing
import TestSupport
import ThingAgent

/// The CLI's device requests (set, info --fetch, wifi-scan, transfer, scene run). While the daemon runs they go
/// through it: the command never opens the cache for writing (strace lists every file it opens) and the daemon's
/// API shows what an answer changed at once. With no daemon the command does the daemon's work itself, holding
/// the cache's lock, and the file shows it.
@Suite("device requests: through the daemon, or by the command alone", .serialized)
struct DeviceRequestTests {
    /// Runs a CLI command under strace; returns its result, the syscall lines that named the files below, and those
    /// that opened the cache file,
    /// SQLite's rollback journal or the agent's journal for writing (or created, truncated, renamed or removed
    /// one). A connection that may write opens the cache file read-write; a read-only one opens it O_RDONLY (and,
    /// being a reader of a WAL database, still opens `-wal` and `-shm` read-write to map the shared index, so those
    /// two say nothing). Nor the lock file, which a command opens to learn who holds it.
    static func traced(_ harness: AgentHarness, _ arguments: [String], environment: [String: String] = [:])
        async throws -> (result: ProcessResult, opens: [String], writes: [String]) {
        let trace = harness.directory + "/trace-\(UInt32.random(in: 0...UInt32.max)).txt"
        let result = try await runCommand("/usr/bin/strace", [
            "-f", "-qq", "-e", "trace=open,openat,creat,truncate,rename,renameat,renameat2,unlink,unlinkat",
            "-o", trace, thingAgentExecutable(),
        ] + arguments + ["--broker", harness.broker.url, "--db", harness.database],
            environment: environment, timeout: .seconds(60))
        // SQLite names the file by its full path with doubled slashes folded (the temporary directory has one).
        let paths = [harness.database, harness.database.replacingOccurrences(of: "//", with: "/")]
        let files = paths.flatMap { path in ["", "-journal", ".journal"].map { "\"\(path)\($0)\"" } }
        let reads = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n").filter { line in
            files.contains { line.contains($0) }
        }
        let writes = reads.filter { line in
            let opensToWrite = ["O_RDWR", "O_WRONLY", "O_CREAT", "O_TRUNC"].contains { line.contains($0) }
            let changesTheName = ["truncate(", "rename", "unlink"].contains { line.contains($0) }
            return opensToWrite || changesTheName
        }
        return (result, reads.map(String.init), writes.map(String.init))
    }

    /// The gateway fleet of `GatewayCommandsTests` (gwNew, gwOld with sub1 and sub2, plug that scans), a lamp that
    /// takes sets and a bulb that answers info/get; each answering task with it.
    static func fleet(_ broker: MosquittoBroker) async throws -> (devices: [SimulatedDevice], tasks: [Task<Void, Never>],
                                                                   script: GatewayCommandsTests.Script) {
        var devices = try await GatewayCommandsTests.fleet(broker)
        let script = GatewayCommandsTests.Script()
        var tasks = [try await GatewayCommandsTests.play(script, on: devices[0])]
        tasks.append(try await devices[4].answer("wifi/scan") { _ in
            #""code":0,"data":[{"ssid":"Home","rssi":-48,"sec":5},{"ssid":"Cafe","rssi":-75,"sec":0}]"#
        })
        let (lamp, setting) = try await SetCommandTests.device("lamp", broker, answer: #""code":0"#)
        let bulb = try SimulatedDevice("bulb", brokerURL: broker.url)
        try await bulb.connect()
        try await bulb.info(#"{"name":"Bulb","firmwareVersion":"1.0.0"}"#, time: t0)
        try await bulb.status(true, time: t0)
        tasks += [setting, try await bulb.answer("info/get") { _ in #""code":0,"data":{"firmwareVersion":"2.0.0"}"# }]
        devices += [lamp, bulb]
        return (devices, tasks, script)
    }

    static func waitForFleet(_ harness: AgentHarness) async throws {
        _ = try await harness.waitForInfo("bulb") { $0["firmwareVersion"] == "1.0.0" }
        _ = try await harness.waitForInfo("lamp") { $0["online"] == true }
        for id in ["gwNew", "gwOld", "sub1", "sub2", "plug"] { _ = try await harness.waitForInfo(id) { _ in true } }
    }

    static func writeScenes(_ harness: AgentHarness) throws -> String {
        let file = harness.directory + "/scenes.json"
        try #"{"scenes":[{"name":"night","actions":[{"device":"lamp","set":{"switch_1":false}}]}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test(.timeLimit(.minutes(3)))
    func whileTheDaemonRunsItSendsTheRequestsAndAloneWritesTheFile() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let (devices, tasks, script) = try await Self.fleet(broker)
            try await Self.waitForFleet(harness)

            let set = try await Self.traced(harness, ["set", "lamp", "switch_1=true"])
            #expect(set.result.status == 0, "\(set.result.stderr)")
            #expect(set.result.stdout.hasPrefix("lamp: applied switch_1=true (msgId "))
            #expect(set.writes.isEmpty, "\(set.writes)")
            // The trace does see the command's opens: it read the lamp from the file for its checks.
            #expect(set.opens.contains { $0.contains("O_RDONLY") }, "\(set.opens)")

            let fetch = try await Self.traced(harness, ["info", "bulb", "--fetch", "--json"])
            #expect(fetch.result.status == 0, "\(fetch.result.stderr)")
            #expect(try JSONParser.parse(fetch.result.stdout)["firmwareVersion"] == "2.0.0")
            #expect(fetch.writes.isEmpty, "\(fetch.writes)")
            // No waiting: the daemon took the answer in before it answered the command.
            let info = try await OneWriterTests.ask(harness, "info", JSONObject([("device", "bulb")]))
            #expect(info["data"]?["firmwareVersion"] == "2.0.0")

            let scan = try await Self.traced(harness, ["wifi-scan", "plug", "--json"])
            #expect(scan.result.status == 0, "\(scan.result.stderr)")
            #expect(try JSONParser.parse(scan.result.stdout).arrayValue?.map { $0["ssid"] } == ["Home", "Cafe"])
            #expect(scan.writes.isEmpty, "\(scan.writes)")

            let scenes = try Self.writeScenes(harness)
            let scene = try await Self.traced(harness, ["scene", "run", "night", "--scenes", scenes])
            #expect(scene.result.status == 0, "\(scene.result.stderr)")
            #expect(scene.result.stdout.contains("scene night: all 1 action applied"))
            #expect(scene.writes.isEmpty, "\(scene.writes)")

            let transfer = ["transfer", "gwNew", "--from", "gwOld"]
            script.set([(.deviceConfigInit, ""), (.failed, "no_route")])
            let failed = try await Self.traced(harness, transfer)
            #expect(failed.result.status == 1)
            #expect(failed.result.stderr.contains("failed with failedCode no_route"))
            #expect(failed.writes.isEmpty, "\(failed.writes)")

            script.set([(.deviceConfigInit, ""), (.deviceDataInit, ""), (.osConfigInit, ""), (.finish, "")])
            let finished = try await Self.traced(harness, transfer)
            #expect(finished.result.status == 0, "\(finished.result.stdout) \(finished.result.stderr)")
            #expect(finished.result.stdout.contains("osConfigInit (3/4)"))
            #expect(finished.result.stdout.contains("finished: 2 sub-devices of gwOld now on gwNew: sub1, sub2"))
            #expect(finished.writes.isEmpty, "\(finished.writes)")
            let moved = try await harness.cli(["devices", "--gateway", "gwNew", "--json"])
            #expect(try JSONParser.parse(moved.stdout).arrayValue?.map { $0["devId"] } == ["sub1", "sub2"])

            // A transfer that stops reporting: the daemon's own timer ends it (it runs with a short stall timeout).
            try await harness.stopDaemon()
            try await harness.startDaemon(environment: ["THING_AGENT_TRANSFER_STALL_TIMEOUT": "1"])
            script.set([(.deviceConfigInit, "")])
            let stalled = try await Self.traced(harness, transfer)
            #expect(stalled.result.status == 5, "\(stalled.result.stderr)")
            #expect(stalled.result.stderr.contains("made no progress for 1 s"))
            #expect(stalled.writes.isEmpty, "\(stalled.writes)")
            // The command gives up on the stall timeout the daemon named; the daemon's own timer ends the transfer
            // in its file (at its next check, a moment later on a loaded machine).
            try await waitUntil(timeout: .seconds(10)) {
                (try? await harness.info("gwNew"))?["transfer"]?["failedCode"] == "timeout"
            }

            let patience = try await Self.traced(harness, transfer + ["--timeout", "0.5"])
            #expect(patience.result.status == 5)
            #expect(patience.result.stderr.contains("gave up waiting after 0.5 s"))
            #expect(patience.writes.isEmpty, "\(patience.writes)")

            for task in tasks { task.cancel() }
            for device in devices { await device.disconnect() }
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func withNoDaemonTheCommandDoesTheDaemonsWorkAndTheFileShowsIt() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            // A daemon caches the fleet, then stops: from then on the commands write the file themselves.
            try await harness.startDaemon()
            let (devices, tasks, script) = try await Self.fleet(broker)
            try await Self.waitForFleet(harness)
            try await harness.stopDaemon()

            let set = try await harness.cli(["set", "lamp", "switch_1=true"])
            #expect(set.status == 0, "\(set.stderr)")
            #expect(set.stdout.hasPrefix("lamp: applied switch_1=true (msgId "))

            let fetch = try await harness.cli(["info", "bulb", "--fetch", "--json"])
            #expect(fetch.status == 0, "\(fetch.stderr)")
            #expect(try JSONParser.parse(fetch.stdout)["firmwareVersion"] == "2.0.0")
            #expect(try CacheReader(path: harness.database).device("bulb")?.info["firmwareVersion"] == "2.0.0")

            let scan = try await harness.cli(["wifi-scan", "plug"])
            #expect(scan.status == 0, "\(scan.stderr)")
            #expect(scan.stdout.contains("2 networks seen by plug"))

            let scene = try await harness.cli(["scene", "run", "night", "--scenes", try Self.writeScenes(harness)])
            #expect(scene.status == 0, "\(scene.stderr)")

            let transfer = ["transfer", "gwNew", "--from", "gwOld"]
            script.set([(.deviceConfigInit, ""), (.failed, "no_route")])
            let failed = try await harness.cli(transfer)
            #expect(failed.status == 1)
            #expect(failed.stderr.contains("failed with failedCode no_route"))

            // Its own stall timer, as the daemon's would.
            script.set([(.deviceConfigInit, "")])
            let stalled = try await runCommand(thingAgentExecutable(), transfer + [
                "--broker", broker.url, "--db", harness.database,
            ], environment: ["THING_AGENT_TRANSFER_STALL_TIMEOUT": "1"])
            #expect(stalled.status == 5, "\(stalled.stderr)")
            #expect(stalled.stderr.contains("made no progress for 1 s"))
            #expect(try CacheReader(path: harness.database).device("gwNew")?.transfer?.failedCode == "timeout")

            script.set([(.deviceConfigInit, ""), (.deviceDataInit, ""), (.osConfigInit, ""), (.finish, "")])
            let finished = try await harness.cli(transfer)
            #expect(finished.status == 0, "\(finished.stdout) \(finished.stderr)")
            #expect(finished.stdout.contains("finished: 2 sub-devices of gwOld now on gwNew: sub1, sub2"))
            #expect(try CacheReader(path: harness.database).subDevices(of: "gwNew").map(\.id) == ["sub1", "sub2"])

            // The daemon started again reads what the commands wrote.
            try await harness.startDaemon()
            let info = try await OneWriterTests.ask(harness, "info", JSONObject([("device", "sub1")]))
            #expect(info["data"]?["gatewayId"] == "gwNew")

            for task in tasks { task.cancel() }
            for device in devices { await device.disconnect() }
        }
    }
}
