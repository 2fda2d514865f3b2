import Foundation
import JSON
import Testing
import TestSupport

/// What an operator watches: the agent's own status, metrics and health, and offline alerts across restarts.
@Suite("Operating the daemon: its status, metrics, health, alerts", .timeLimit(.minutes(3)))
struct OperationsTests {
    static func port(_ broker: MosquittoBroker) -> String { String(broker.url.split(separator: ":").last!) }

    /// The retained message on `topic`, as an outside client (`mosquitto_sub`) sees it; nil when there is none.
    static func retained(_ topic: String, _ broker: MosquittoBroker) async throws -> String? {
        let result = try await runCommand("/usr/bin/mosquitto_sub", [
            "-h", "127.0.0.1", "-p", port(broker), "-t", topic, "-C", "1", "-W", "2", "--retained-only"])
        let text = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// Takes `produce` again and again until `done` holds for what it gave; returns that.
    static func poll<T: Sendable>(timeout: Duration, _ produce: @Sendable () async -> T,
                                  until done: @Sendable (T) -> Bool) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while true {
            let value = await produce()
            if done(value) { return value }
            guard ContinuousClock.now < deadline else { throw TestSupportError("not within \(timeout): \(value)") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    @Test("after a broker restart without persistence the agent is online again, retained, and says it reconnected")
    func statusAfterBrokerRestart() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon(["--log-level", "info"])
            let topic = "thing-agent/agents/\(harness.clientID)/status"
            let daemon = try #require(harness.daemon)
            #expect(daemon.log.contains("connected to \(broker.url)"))

            try await broker.restart()
            try await waitUntil(timeout: .seconds(30)) { daemon.log.contains("reconnected to \(broker.url) after ") }
            // The new broker knew nothing: the status it holds now is the one the agent published on reconnecting.
            let status = try await Self.poll(timeout: .seconds(15), { try? await Self.retained(topic, broker) }) {
                $0?.contains("\"online\"") == true
            }
            let announcement = try JSONParser.parse(try #require(status))
            #expect(announcement["status"] == "online")
            #expect((announcement["time"]?.int64Value ?? 0) > t0)
        }
    }

    @Test("two daemons with one client id: each says another client uses it")
    func twoDaemonsOneClientID() async throws {
        try await withBroker { broker in
            let clientID = "twin-\(UInt32.random(in: 0...UInt32.max))"
            let first = try AgentHarness(broker: broker, clientID: clientID)
            let second = try AgentHarness(broker: broker, clientID: clientID)
            try await first.startDaemon()
            // The second's start may itself be cut short by the first taking the id back: wait for its log only.
            try await second.startDaemon(timeout: .seconds(30))
            let message = "another client uses client id \"\(clientID)\""
            try await waitUntil(timeout: .seconds(60)) {
                (first.daemon?.log.contains(message) ?? false) || (second.daemon?.log.contains(message) ?? false)
            }
            let lines = ((first.daemon?.log ?? "") + (second.daemon?.log ?? "")).split(separator: "\n")
            #expect(lines.contains { $0.contains(message) && $0.contains("error") })
        }
    }

    @Test("GET /metrics passes promtool and counts what happened; /health follows the broker connection")
    func metricsAndHealth() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let metricsPort = try freeLoopbackPort()
            try await harness.startDaemon(["--metrics", "127.0.0.1:\(metricsPort)"])
            let device = try SimulatedDevice("meter1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            for n in 1...5 { try await device.properties(#"{"power":\#(n)}"#, time: t0 + Int64(n)) }
            // An answer to a request this daemon never sent: for other clients, not a drop.
            try await device.publish("properties/set_response", #"{"msgId":"cli-1","time":\#(t0),"code":0}"#)

            let text = try await Self.poll(timeout: .seconds(15), {
                (try? httpRequest(port: metricsPort, path: "/metrics").body) ?? ""
            }) { text in
                // The reports are in, and a batch of them has reached SQLite (the flusher runs on its own thread).
                text.contains(#"thing_agent_messages_total{outcome="for_other_clients"} 1"#)
                    && !text.contains("thing_agent_flush_duration_seconds_count 0\n")
            }
            let file = harness.directory + "/metrics.txt"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let check = try await runCommand("/bin/sh", ["-c", "/usr/bin/promtool check metrics < \(file)"])
            #expect(check.status == 0, "promtool: \(check.stdout) \(check.stderr)")
            let lines = Set(text.split(separator: "\n").map(String.init))
            #expect(lines.contains(#"thing_agent_messages_total{outcome="applied"} 6"#), "\(text)")
            #expect(lines.contains(#"thing_agent_messages_total{outcome="dropped",reason="unmatchedResponse"} 0"#))
            #expect(lines.contains(#"thing_agent_devices{status="online"} 1"#))
            #expect(lines.contains("thing_agent_broker_connected 1"))
            #expect(lines.contains { $0.hasPrefix("thing_agent_build_info{version=\"") && $0.hasSuffix("\"} 1") })
            #expect(lines.contains { $0.hasPrefix("process_start_time_seconds ") })
            #expect(lines.contains { $0.hasPrefix("thing_agent_flush_duration_seconds_count ") && !$0.hasSuffix(" 0") })

            let healthy = try httpRequest(port: metricsPort, path: "/health")
            #expect(healthy.status == 200)
            #expect(try JSONParser.parse(healthy.body)["status"] == "ok")
            #expect(try httpRequest(port: metricsPort, path: "/nothing").status == 404)

            broker.kill()
            let down = try await Self.poll(timeout: .seconds(30), {
                (try? httpRequest(port: metricsPort, path: "/health")) ?? (0, "")
            }) { $0.status == 503 }
            #expect(try JSONParser.parse(down.body)["checks"]?["broker"]?["ok"] == false)
            #expect(try httpRequest(port: metricsPort, path: "/metrics").body.contains("thing_agent_broker_connected 0"))
            try await broker.restart()
            try await waitUntil(timeout: .seconds(30)) {
                (try? httpRequest(port: metricsPort, path: "/health").status) == 200
            }
            await device.disconnect()
        }
    }

    @Test("a bad --metrics address is a usage error that names the flag")
    func badMetricsAddress() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let result = try await runCommand(thingAgentExecutable(), [
                "run", "--broker", broker.url, "--db", harness.database, "--metrics", "no-port-here"])
            #expect(result.status == 2, "\(result.stderr)")
            #expect(result.stderr.contains("--metrics"), "\(result.stderr)")
        }
    }

    @Test("the API answers health like GET /health")
    func healthOverTheAPI() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let replies = try DaemonProcess("/usr/bin/mosquitto_sub", [
                "-h", "127.0.0.1", "-p", Self.port(broker), "-t", "thing-agent/replies/ops", "-C", "1", "-W", "30"],
                logPath: harness.directory + "/replies.log")
            let request = "thing-agent/api/\(harness.clientID)/request/health"
            let deadline = ContinuousClock.now + .seconds(20)
            while replies.isRunning, ContinuousClock.now < deadline {
                _ = try await runCommand("/usr/bin/mosquitto_pub", [
                    "-h", "127.0.0.1", "-p", Self.port(broker), "-q", "1", "-t", request,
                    "-m", #"{"id":"h1","replyTo":"thing-agent/replies/ops"}"#])
                try await Task.sleep(for: .milliseconds(300))
            }
            let reply = try JSONParser.parse(replies.log.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(reply["code"] == 0, "\(replies.log)")
            #expect(reply["data"]?["status"] == "ok")
            #expect(reply["data"]?["checks"]?["broker"]?["ok"] == true)
        }
    }
}
