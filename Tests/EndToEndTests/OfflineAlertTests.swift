import Foundation
import JSON
import Testing
import TestSupport

/// Exactly one offline warning per offline episode, seen by an outside consumer (`mosquitto_sub`), also when the
/// daemon is stopped or killed during the grace period; and an `online` event when a warned device returns.
@Suite("Offline alerts that survive restarts", .timeLimit(.minutes(3)))
struct OfflineAlertTests {
    /// `mosquitto_sub` on the offline and online events, printing "<qos> <topic> <payload>" per message.
    final class EventWatcher: Sendable {
        let process: DaemonProcess

        init(_ broker: MosquittoBroker, directory: String) throws {
            process = try DaemonProcess("/usr/bin/mosquitto_sub", [
                "-h", "127.0.0.1", "-p", OperationsTests.port(broker), "-q", "1", "-F", "%q %t %p",
                "-t", "thing-agent/events/+/offline", "-t", "thing-agent/events/+/online",
            ], logPath: directory + "/events.log")
        }

        /// Waits until the subscription is in place: a marker published until it shows up.
        func waitUntilSubscribed(_ broker: MosquittoBroker) async throws {
            let deadline = ContinuousClock.now + .seconds(20)
            while !process.log.contains("marker") {
                guard ContinuousClock.now < deadline else { throw TestSupportError("mosquitto_sub never subscribed") }
                _ = try await runCommand("/usr/bin/mosquitto_pub", [
                    "-h", "127.0.0.1", "-p", OperationsTests.port(broker), "-t", "thing-agent/events/marker/online",
                    "-m", "marker"])
                try await Task.sleep(for: .milliseconds(200))
            }
        }

        /// (qos, payload) of every event of `kind` about `device`.
        func events(_ kind: String, of device: String) -> [(qos: String, payload: JSONValue)] {
            process.log.split(separator: "\n").compactMap { line in
                let parts = line.split(separator: " ", maxSplits: 2)
                guard parts.count == 3, parts[1] == "thing-agent/events/\(device)/\(kind)",
                      let payload = try? JSONParser.parse(String(parts[2])) else { return nil }
                return (String(parts[0]), payload)
            }
        }
    }

    /// A daemon with offline grace `grace` seconds, and an outside consumer of its events already subscribed.
    static func watchedDaemon(_ broker: MosquittoBroker, grace: Int) async throws
        -> (AgentHarness, EventWatcher, [String: String])
    {
        let harness = try AgentHarness(broker: broker)
        let environment = ["THING_AGENT_OFFLINE_GRACE": "\(grace)"]
        try await harness.startDaemon(environment: environment)
        let watcher = try EventWatcher(broker, directory: harness.directory)
        try await watcher.waitUntilSubscribed(broker)
        return (harness, watcher, environment)
    }

    @Test("stopped or killed during the grace period, the daemon warns once after its restart, never twice",
          arguments: [SIGKILL, SIGTERM])
    func oneWarningAcrossRestarts(signal: Int32) async throws {
        try await withBroker { broker in
            let (harness, watcher, environment) = try await Self.watchedDaemon(broker, grace: 6)
            let device = try SimulatedDevice("door1", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            _ = try await harness.waitForInfo("door1") { $0["online"] == true }
            try await device.status(false, time: t0 + 1)
            _ = try await harness.waitForInfo("door1") { $0["online"] == false }

            // Within the grace period (or just after it, on a slow machine: exactly one warning either way).
            let daemon = try #require(harness.daemon)
            daemon.signal(signal)
            _ = await daemon.waitForExit(timeout: .seconds(10))
            try await harness.startDaemon(environment: environment)
            try await waitUntil(timeout: .seconds(30)) { !watcher.events("offline", of: "door1").isEmpty }
            let warning = try #require(watcher.events("offline", of: "door1").first)
            #expect(warning.qos == "1", "the feed publishes at QoS 1 by default")
            #expect(warning.payload["event"] == "offline")
            let since = try #require(warning.payload["offlineSince"]?.int64Value)

            // Another restart after the warning does not repeat it. A second device's warning marks the moment by
            // which a repeat would have come (the first device's grace period has long passed).
            let warned = try #require(harness.daemon)
            warned.signal(signal)
            _ = await warned.waitForExit(timeout: .seconds(10))
            try await harness.startDaemon(environment: environment)
            let other = try SimulatedDevice("door2", brokerURL: broker.url)
            try await other.connect()
            try await other.status(true, time: t0)
            _ = try await harness.waitForInfo("door2") { $0["online"] == true }
            try await other.status(false, time: t0 + 1)
            try await waitUntil(timeout: .seconds(30)) { !watcher.events("offline", of: "door2").isEmpty }
            #expect(watcher.events("offline", of: "door1").count == 1, "\(watcher.process.log)")

            // The warned device returns: one online event, with how long it was away.
            try await device.status(true, time: t0 + 2)
            try await waitUntil(timeout: .seconds(30)) { !watcher.events("online", of: "door1").isEmpty }
            let back = try #require(watcher.events("online", of: "door1").first)
            #expect(back.qos == "1")
            #expect(back.payload["offlineSince"]?.int64Value == since)
            #expect((back.payload["awayMs"]?.int64Value ?? 0) > 0)
            await device.disconnect()
            await other.disconnect()
        }
    }

    @Test("a device back online within the grace period gives neither warning nor online event")
    func noEventsWithinGrace() async throws {
        try await withBroker { broker in
            // A grace long enough for the quick device's two reports to reach the daemon beside a second whole suite
            // (4 s was once outlasted: 4.7 s between them).
            let (harness, watcher, _) = try await Self.watchedDaemon(broker, grace: 8)
            let quick = try SimulatedDevice("blink1", brokerURL: broker.url)
            let slow = try SimulatedDevice("blink2", brokerURL: broker.url)
            for device in [quick, slow] {
                try await device.connect()
                try await device.status(true, time: t0)
            }
            try await quick.status(false, time: t0 + 1)
            try await slow.status(false, time: t0 + 1)
            try await quick.status(true, time: t0 + 2)
            // The slow one's warning comes after the quick one's grace period ended too.
            try await waitUntil(timeout: .seconds(30)) { !watcher.events("offline", of: "blink2").isEmpty }
            #expect(watcher.events("offline", of: "blink1").isEmpty)
            #expect(watcher.events("online", of: "blink1").isEmpty)
            #expect(harness.daemon?.isRunning == true)
            await quick.disconnect()
            await slow.disconnect()
        }
    }
}
