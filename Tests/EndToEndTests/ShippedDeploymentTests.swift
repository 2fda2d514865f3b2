import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// The real daemon and CLI behind the shipped broker configuration: client ids tied to users, and the operators'
/// CLI doing what it documents.
@Suite("the daemon and the CLI behind the shipped broker configuration", .serialized)
struct ShippedDeploymentTests {
    final class Deployment: Sendable {
        let broker: ShippedBroker
        let directory: String
        var database: String { directory + "/cache.sqlite" }

        init() async throws {
            broker = try await ShippedBroker(fleetUsers: ["dev1", "svc-dashboard", "gwNew", "gwOld", "sub1"],
                                             agentUsers: ["thing-agent", "thing-agent-cli"])
            directory = try makeTemporaryDirectory("shipped-deployment")
        }

        /// The daemon as the package runs it on the broker host: the loopback listener, user and client id
        /// thing-agent.
        func startDaemon() async throws -> DaemonProcess {
            let daemon = try DaemonProcess(thingAgentExecutable(), [
                "run", "--broker", broker.loopbackURL, "--username", "thing-agent", "--client-id", "thing-agent",
                "--db", database,
            ], environment: ["THING_AGENT_PASSWORD": ShippedBroker.password], logPath: directory + "/daemon.log")
            try await waitUntil(timeout: .seconds(20)) {
                daemon.log.contains("connected and subscribed") || !daemon.isRunning
            }
            guard daemon.isRunning else { throw TestSupportError("the daemon exited: \(daemon.log)") }
            return daemon
        }

        /// CLI options of an operator on another host: the TLS agent listener, user thing-agent-cli.
        var operatorOptions: [String] {
            ["--broker", broker.agentURL, "--ca-file", broker.certificates.caFile, "--username", "thing-agent-cli",
             "--db", database]
        }
        var operatorEnvironment: [String: String] { ["THING_AGENT_PASSWORD": ShippedBroker.password] }

        func info(_ device: String) async throws -> JSONObject? {
            let result = try await runCommand(thingAgentExecutable(), ["info", device, "--json", "--db", database])
            return result.status == 0 ? try JSONParser.parse(result.stdout).objectValue : nil
        }

        func waitForInfo(_ device: String, _ condition: @escaping @Sendable (JSONObject) -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if let info = try await info(device), condition(info) { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw TestSupportError("condition not met for \(device): \(try await info(device) ?? [:])")
        }

        /// A device on the fleet listener under its own user, reporting its info and status.
        func device(_ id: String, _ info: String, online: Bool) async throws -> SimulatedDevice {
            let device = SimulatedDevice(id, client: try broker.client(id))
            try await device.connect()
            try await device.info(info, time: t0)
            try await device.status(online, time: t0)
            return device
        }

        deinit {
            broker.stop()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aDeviceUsingTheAgentsClientIdNeitherKnocksItOffNorTakesItsSession() async throws {
        let deployment = try await Deployment()
        let broker = deployment.broker
        var daemon = try await deployment.startDaemon()

        // On the fleet listener the broker replaces the client id by the user name: the connection is dev1's.
        let impostor = try broker.client("dev1", clientID: "thing-agent", cleanSession: false)
        try await impostor.connect()
        let device = SimulatedDevice("dev1", client: impostor)
        try await device.status(true, time: t0)
        try await deployment.waitForInfo("dev1") { $0["online"] == true }
        #expect(!daemon.log.contains("connection lost"), "the agent was knocked off: \(daemon.log)")
        #expect(broker.output.contains("as dev1"), "\(broker.output)")

        // On the agent's listeners a device's credentials are refused outright.
        for url in [broker.agentURL, broker.loopbackURL] {
            var configuration = MQTTConfiguration(url: url, clientID: "thing-agent")
            configuration.username = "dev1"
            configuration.password = ShippedBroker.password
            if url.hasPrefix("mqtts") { configuration.tls = MQTTTLS(caFile: broker.certificates.caFile) }
            let refused = try MQTTClient(configuration: configuration)
            await #expect(throws: MQTTError.self, "a device on \(url)") { try await refused.connect() }
            await refused.disconnect()
        }

        // The agent stops; its persistent session queues what devices report meanwhile. A device connecting
        // with the agent's client id and a clean start would wipe that queue, if it could take the session.
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        let codes = (1...20).map { "p\($0)" }
        for (index, code) in codes.enumerated() {
            try await device.properties("{\"\(code)\":\(index)}", time: t0 + 10 + Int64(index))
        }
        await impostor.disconnect()
        let wiper = try broker.client("dev1", clientID: "thing-agent", cleanSession: true)
        try await wiper.connect()
        await wiper.disconnect()
        daemon = try await deployment.startDaemon()
        try await deployment.waitForInfo("dev1") { info in
            codes.allSatisfy { info["properties"]?[$0] != nil }
        }
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func theOperatorsCLIFetchesAndWatchesSideBySideThroughTheShippedACL() async throws {
        let deployment = try await Deployment()
        let broker = deployment.broker
        let daemon = try await deployment.startDaemon()
        let device = SimulatedDevice("dev1", client: try broker.client("dev1"))
        try await device.connect()
        try await device.status(true, time: t0)
        try await deployment.waitForInfo("dev1") { $0["online"] == true }
        let answering = try await device.answer("info/get") { _ in #""code":0,"data":{"name":"Porch lamp"}"# }

        // watch and info --fetch at once: each CLI connection has a client id of its own on this listener.
        let watch = try DaemonProcess(thingAgentExecutable(), ["watch"] + deployment.operatorOptions,
                                      environment: deployment.operatorEnvironment,
                                      logPath: deployment.directory + "/watch.log")
        try await waitUntil(timeout: .seconds(20)) { broker.output.contains("u'thing-agent-cli'") || !watch.isRunning }
        let fetched = try await runCommand(thingAgentExecutable(), ["info", "dev1", "--fetch", "--json"]
                                           + deployment.operatorOptions, environment: deployment.operatorEnvironment)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(try JSONParser.parse(fetched.stdout)["name"] == "Porch lamp")
        // An edit goes to the daemon's API, the answer comes back under the operator's own replies.
        let edit = try await runCommand(thingAgentExecutable(), ["edit", "dev1", "--room", "Porch", "--json"]
                                        + deployment.operatorOptions, environment: deployment.operatorEnvironment)
        #expect(edit.status == 0, "\(edit.stderr)")
        #expect(try JSONParser.parse(edit.stdout)["room"] == "Porch")

        try await device.properties(#"{"bright_value":640}"#, time: t0 + 50)
        try await waitUntil(timeout: .seconds(20)) { watch.log.contains("640") || !watch.isRunning }
        #expect(watch.isRunning, "watch ended: \(watch.log)")
        watch.signal(SIGINT)
        #expect(await watch.waitForExit(timeout: DaemonProcess.hangBound) == 0)
        answering.cancel()
        await device.disconnect()
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func theOperatorsTransferRunsToItsEndThroughTheShippedACL() async throws {
        let deployment = try await Deployment()
        let daemon = try await deployment.startDaemon()
        let gateway = #""productId":"p-gateway-1","category":"gateway","spaceId":1001"#
        let gwNew = try await deployment.device("gwNew", #"{"name":"New",\#(gateway),"abilities":["gatewayTransfer"]}"#,
                                                online: true)
        let gwOld = try await deployment.device("gwOld", #"{"name":"Old",\#(gateway),"abilities":["gatewayTransfer"]}"#,
                                                online: false)
        let sub1 = try await deployment.device("sub1", #"{"category":"subdevice","gatewayId":"gwOld"}"#, online: true)
        try await deployment.waitForInfo("sub1") { $0["gatewayId"] == "gwOld" }
        try await deployment.waitForInfo("gwNew") { $0["online"] == true }
        try await deployment.waitForInfo("gwOld") { $0["online"] == false }

        let script = GatewayCommandsTests.Script()
        script.set([(.deviceConfigInit, ""), (.deviceDataInit, ""), (.osConfigInit, ""), (.finish, "")])
        let playing = try await GatewayCommandsTests.play(script, on: gwNew)
        let transfer = try await runCommand(thingAgentExecutable(), ["transfer", "gwNew", "--from", "gwOld"]
                                            + deployment.operatorOptions, environment: deployment.operatorEnvironment,
                                            timeout: .seconds(60))
        #expect(transfer.status == 0, "\(transfer.stdout) \(transfer.stderr)")
        #expect(transfer.stdout.contains("finished: 1 sub-devices of gwOld now on gwNew: sub1")
                || transfer.stdout.contains("finished: 1 sub-device of gwOld now on gwNew: sub1"), "\(transfer.stdout)")
        try await deployment.waitForInfo("sub1") { $0["gatewayId"] == "gwNew" }
        playing.cancel()
        for device in [gwNew, gwOld, sub1] { await device.disconnect() }
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func aServiceGetsAPIAnswersAndEventsFromTheRealDaemonThroughTheShippedACL() async throws {
        let deployment = try await Deployment()
        let daemon = try await deployment.startDaemon()
        let service = try await BrokerProbe.connect(try deployment.broker.client("svc-dashboard"), subscribing: [
            "thing-agent/replies/svc-dashboard/#", "thing-agent/events/#",
        ])
        let device = try await deployment.device("dev1", #"{"name":"Desk lamp"}"#, online: true)
        try await deployment.waitForInfo("dev1") { $0["online"] == true }
        try await waitUntil(timeout: .seconds(20)) { service.payloadsContaining("Desk lamp") > 0 }

        let request = #"{"id":"svc-r1","device":"dev1","replyTo":"thing-agent/replies/svc-dashboard/r1"}"#
        try await service.client.publish("thing-agent/api/thing-agent/request/info", payload: Array(request.utf8),
                                         qos: .atLeastOnce)
        try await waitUntil(timeout: .seconds(20)) { service.payloadsContaining("svc-r1") > 0 }
        #expect(service.payloadsContaining("Desk lamp") >= 2, "the answer carries the device")
        await device.disconnect()
        await service.disconnect()
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)
    }
}
