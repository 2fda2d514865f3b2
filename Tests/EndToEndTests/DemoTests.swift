import Foundation
#if canImport(Glibc)
import Glibc
#endif
import JSON
import Testing
import TestSupport

/// The README's demo as a new user meets it: `scripts/demo` (what `scripts/run` runs after building) with the
/// shipped Config/agent.json, its own mosquitto with the dynamic-security plugin, and the simulated fleet; the
/// commands of the README's demo from a shell that sourced data/demo.env; the embedding example against it; a stop
/// that ends the fleet before the broker, and a second start that finds everything again.
@Suite("The demo", .serialized)
struct DemoTests {
    /// A directory like a checkout (Config/ as shipped), where the demo makes its data/.
    final class Demo: Sendable {
        let directory: String
        let port: Int
        let tuyaLinkPort: Int
        let metricsPort: Int

        init() throws {
            directory = try makeTemporaryDirectory("thing-agent-demo")
            // mosquitto, started as root, drops to its own user: it must reach data/mosquitto/ under here.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
            try FileManager.default.createSymbolicLink(atPath: directory + "/Config",
                                                       withDestinationPath: repositoryRoot() + "/Config")
            port = try freeLoopbackPort()
            tuyaLinkPort = try freeLoopbackPort()
            metricsPort = try freeLoopbackPort()
        }

        /// Started as from a shell (`DaemonProcess` gives it a clean signal mask, so the script's trap hears SIGTERM).
        func start(log: String) throws -> DaemonProcess {
            try DaemonProcess(repositoryRoot() + "/scripts/demo", [thingAgentExecutable()], environment: [
                "THING_AGENT_DEMO_PORT": "\(port)", "THING_AGENT_DEMO_TUYALINK_PORT": "\(tuyaLinkPort)",
                "THING_AGENT_METRICS": "127.0.0.1:\(metricsPort)",
            ], logPath: directory + "/" + log, directory: directory)
        }

        /// A command line run as the README says: in the demo's directory, after `. data/demo.env`.
        func shell(_ command: String, timeout: Duration = .seconds(60)) async throws -> ProcessResult {
            try await runCommand("/bin/bash", ["-c", ". data/demo.env && " + command], timeout: timeout,
                                 directory: directory)
        }

        func file(_ path: String) -> String {
            (try? String(contentsOfFile: directory + "/" + path, encoding: .utf8)) ?? ""
        }

        /// The devices `devices --json` lists as online.
        func online() async -> Set<String> {
            guard let result = try? await shell("thing-agent devices --json"), result.status == 0,
                  let list = (try? JSONParser.parse(result.stdout))?.arrayValue else { return [] }
            return Set(list.filter { $0["online"] == true }.compactMap { $0["devId"]?.stringValue })
        }

        func stop(_ demo: DaemonProcess) async throws {
            demo.signal(SIGTERM)
            let status = await demo.waitForExit(timeout: DaemonProcess.hangBound)
            #expect(status == 0, "\(demo.log)")
        }

        /// After a failure: the script and everything it started, killed and waited for here (the script runs
        /// its children in sessions of their own, which outlive it).
        func kill(_ demo: DaemonProcess) async {
            demo.signal(SIGKILL)
            _ = await demo.waitForExit(timeout: DaemonProcess.hangBound)
            for pid in file("data/demo.pids").split(separator: "\n").compactMap({ Int32($0) }) {
                Glibc.kill(pid, SIGKILL)
            }
        }

        deinit {
            releaseLoopbackPort(port)
            releaseLoopbackPort(tuyaLinkPort)
            releaseLoopbackPort(metricsPort)
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test(.timeLimit(.minutes(5)))
    func theReadmesDemoWorksStopsInOrderAndStartsAgain() async throws {
        let demo = try Demo()
        var started: [DaemonProcess] = []
        do {
            try await Self.walkThrough(demo) { started.append($0) }
        } catch {
            for process in started { await demo.kill(process) }
            throw error
        }
    }

    /// The demo's fleet: 28 native and Alink devices that pair through the agent, and 12 TuyaLink devices that do
    /// not (they connect to the broker's TuyaLink listener, their products given to the agent).
    static let fleetSize = 40

    static func walkThrough(_ demo: Demo, started: (DaemonProcess) -> Void) async throws {
        let first = try demo.start(log: "demo.out")
        started(first)
        try await waitUntil(timeout: .seconds(120)) { await demo.online().count == fleetSize }
        #expect(demo.file("data/simulate.log").contains("28 devices paired and activated through the daemon"))
        #expect(demo.file("data/demo.env").contains("/Config/agent.json\n"), "\(demo.file("data/demo.env"))")
        #expect(demo.file("data/demo.env").contains(#"THING_AGENT_DEVICE_PRODUCTS='{"tl-gw-0dd7-04":"p-gateway-1""#),
                "\(demo.file("data/demo.env"))")

        // The README's demo commands, with no --db and no credentials on the command line.
        let edit = try await demo.shell("thing-agent edit dev-0dd7-01 --name 'Kitchen light' --room Kitchen")
        #expect(edit.status == 0, "\(edit.stderr)")
        let kitchen = try await demo.shell("thing-agent devices --room Kitchen")
        #expect(kitchen.status == 0, "\(kitchen.stderr)")
        #expect(kitchen.stdout.split(separator: "\n").dropFirst().first?.hasPrefix("dev-0dd7-01  Kitchen light  Kitchen ")
                == true, "\(kitchen.stdout)")
        let set = try await demo.shell("thing-agent set dev-0dd7-01 bright_value=500")
        #expect(set.status == 0, "\(set.stderr)")
        // The device answers, then reports the value it now has (and keeps it).
        try await waitUntil(timeout: .seconds(10)) {
            guard let info = try? await demo.shell("thing-agent info dev-0dd7-01 --json") else { return false }
            return (try? JSONParser.parse(info.stdout))?["properties"]?["bright_value"] == 500
        }
        // A third of the fleet speaks Alink (Config/agent.json's dialects): an Alink light paired as one is listed with
        // its name and its values as it posted them (booleans as 0/1), and a set reaches it through the daemon.
        let alink = "a1Light1.dev-0dd7-09"
        let listed = try await demo.shell("thing-agent devices")
        #expect(listed.stdout.split(separator: "\n").contains { $0.hasPrefix(alink + "  ") && $0.contains(" online ") },
                "\(listed.stdout)")
        let alinkInfo = try JSONParser.parse(try await demo.shell("thing-agent info \(alink) --json").stdout)
        #expect(alinkInfo["productId"] == "a1Light1" && alinkInfo["name"]?.stringValue?.isEmpty == false, "\(alinkInfo)")
        let alinkSwitch = try #require(alinkInfo["properties"]?["switch_1"], "\(alinkInfo)")
        #expect(alinkSwitch == 0 || alinkSwitch == 1)
        let alinkSet = try await demo.shell("thing-agent set \(alink) bright_value=400")
        #expect(alinkSet.status == 0, "\(alinkSet.stdout) \(alinkSet.stderr)")
        try await waitUntil(timeout: .seconds(10)) {
            guard let info = try? await demo.shell("thing-agent info \(alink) --json") else { return false }
            return (try? JSONParser.parse(info.stdout))?["properties"]?["bright_value"] == 400
        }
        // A third speaks TuyaLink: a light, listed online with the product the agent was given and its values (booleans
        // as booleans), takes a set; a gateway's sensor, bound and logged in, is linked to it and reports.
        let tuyaLink = "tl-dev-0dd7-17"
        #expect(listed.stdout.split(separator: "\n").contains { $0.hasPrefix(tuyaLink + " ") && $0.contains(" online ") },
                "\(listed.stdout)")
        let tuyaLinkInfo = try JSONParser.parse(try await demo.shell("thing-agent info \(tuyaLink) --json").stdout)
        #expect(tuyaLinkInfo["productId"] == "p-light-1" && tuyaLinkInfo["dialect"] == "tuyalink", "\(tuyaLinkInfo)")
        let tuyaLinkSwitch = try #require(tuyaLinkInfo["properties"]?["switch_1"], "\(tuyaLinkInfo)")
        #expect(tuyaLinkSwitch == true || tuyaLinkSwitch == false)
        let tuyaLinkSet = try await demo.shell("thing-agent set \(tuyaLink) bright_value=300")
        #expect(tuyaLinkSet.status == 0 && tuyaLinkSet.stdout.contains("applied"), "\(tuyaLinkSet.stdout) \(tuyaLinkSet.stderr)")
        try await waitUntil(timeout: .seconds(10)) {
            guard let info = try? await demo.shell("thing-agent info \(tuyaLink) --json") else { return false }
            return (try? JSONParser.parse(info.stdout))?["properties"]?["bright_value"] == 300
        }
        let sensor = try JSONParser.parse(try await demo.shell("thing-agent info tl-sub-0dd7-04-01 --json").stdout)
        #expect(sensor["online"] == true && sensor["gatewayId"] == "tl-gw-0dd7-04" && sensor["productId"] == "p-sensor-1"
                && sensor["properties"]?.objectValue?.isEmpty == false, "\(sensor)")

        // The shipped firmware catalog is loaded: every light is behind its latest version.
        let firmware = try await demo.shell("thing-agent firmware --outdated --json")
        #expect(firmware.status == 0, "\(firmware.stderr)")
        let catalog = try JSONParser.parse(Array(try Data(contentsOf: URL(
            fileURLWithPath: repositoryRoot() + "/Config/firmware.json"))))
        let latest = try #require(catalog["p-light-1"]?["version"]?.stringValue)
        #expect(firmware.stdout.contains(latest), "\(firmware.stdout)")
        // Provisioning is on: pair gives a token and bootstrap credentials.
        let pair = try await demo.shell("thing-agent pair --product p-light-1 --json")
        #expect(pair.status == 0, "\(pair.stderr)")
        #expect(try JSONParser.parse(pair.stdout)["token"]?.stringValue?.isEmpty == false, "\(pair.stdout)")

        // The embedding example, built by scripts/test before the suite, runs green against the demo.
        let example = repositoryRoot() + "/Examples/embed/.build/debug/fleet-dashboard"
        #expect(FileManager.default.isExecutableFile(atPath: example), "scripts/test builds \(example)")
        let embedded = try await demo.shell("'\(example)' '\(demo.directory)/dashboard.sqlite' dev-0dd7-02 1")
        #expect(embedded.status == 0, "\(embedded.stdout)\(embedded.stderr)")
        #expect(embedded.stdout.contains("dev-0dd7-02: switched on"), "\(embedded.stdout)")

        // The stop: the fleet says goodbye while the broker is still there, the broker goes last and saves.
        try await demo.stop(first)
        let simulate = demo.file("data/simulate.log")
        #expect(simulate.contains("simulate: stopped; 0 devices online"), "\(simulate)")
        let broker = demo.file("data/mosquitto/mosquitto.log")
        let agentGone = try #require(broker.range(of: "Client thing-agent disconnected"), "\(broker)")
        let brokerGone = try #require(broker.range(of: "terminating"))
        #expect(agentGone.upperBound < brokerGone.lowerBound)
        #expect(FileManager.default.fileExists(atPath: demo.directory + "/data/mosquitto/mosquitto.db"))

        // A second start: the devices connect with the credentials they kept, and the local edit is still there.
        let second = try demo.start(log: "demo-2.out")
        started(second)
        try await waitUntil(timeout: .seconds(60)) { second.log.contains("thing-agent is running") }
        let cached = try await demo.shell("thing-agent devices --room Kitchen")
        #expect(cached.stdout.contains("dev-0dd7-01"), "readable at once, before any device spoke: \(cached.stdout)")
        try await waitUntil(timeout: .seconds(120)) {
            demo.file("data/simulate.log").contains("28 with the credentials they kept")
        }
        try await waitUntil(timeout: .seconds(60)) { await demo.online().count == fleetSize }
        try await demo.stop(second)
    }
}
