import Foundation
import JSON
import Synchronization
import Testing
import TestSupport

@Suite("Nothing acknowledged is lost", .serialized)
struct DurabilityTests {
    /// The broker keeps QoS 1 messages for the agent's persistent session while it is down.
    static var brokerOptions: MosquittoBroker.Options {
        var options = MosquittoBroker.Options()
        options.extraConfig = "max_queued_messages 0\nmax_inflight_messages 100\n"
        return options
    }

    @Test(.timeLimit(.minutes(2)))
    func sigkillDuringAStreamOfQoS1ReportsLosesNothing() async throws {
        try await withBroker(Self.brokerOptions) { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let devices = try (0..<4).map { try SimulatedDevice("k\($0)", brokerURL: broker.url) }
            for device in devices { try await device.connect() }
            // Each device streams on its own, as devices do, until both kills are behind it: a stream of a fixed
            // length ended before the kills on a fast machine, or outlasted the time limit on a loaded one.
            let streaming = StreamSwitch()
            let stream = Task {
                try await withThrowingTaskGroup(of: (String, Int).self) { group in
                    for device in devices {
                        group.addTask {
                            var n = 0
                            while streaming.isOn || n < 100 {
                                n += 1
                                try await device.properties("{\"counter\":\(n)}", time: t0 + Int64(n))
                            }
                            return (device.id, n)
                        }
                    }
                    var last: [String: Int] = [:]
                    for try await (device, n) in group { last[device] = n }
                    return last
                }
            }
            // Kill the agent twice in the middle of the stream; it comes back with the same persistent session.
            for _ in 0..<2 {
                try await Task.sleep(for: .milliseconds(300))
                let daemon = try #require(harness.daemon)
                daemon.signal(SIGKILL)
                _ = await daemon.waitForExit(timeout: .seconds(5))
                try await Task.sleep(for: .milliseconds(200))
                try await harness.startDaemon()
            }
            try await Task.sleep(for: .milliseconds(300))
            streaming.turnOff()
            let last = try await stream.value
            for device in devices {
                let reports = try #require(last[device.id])
                let info = try await harness.waitForInfo(device.id, timeout: .seconds(30)) {
                    $0["properties"]?["counter"] == .integer(Int64(reports))
                }
                #expect(info["propertyTimes"]?["counter"] == .integer(t0 + Int64(reports)))
            }
            for device in devices { await device.disconnect() }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func reportsPublishedWhileTheAgentIsDownArriveWhenItReturns() async throws {
        try await withBroker(Self.brokerOptions) { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let daemon = try #require(harness.daemon)
            daemon.signal(SIGTERM)
            #expect(await daemon.waitForExit(timeout: DaemonProcess.hangBound) == 0)

            let device = try SimulatedDevice("late", brokerURL: broker.url)
            try await device.connect()
            try await device.properties(#"{"switch_1":false}"#, time: t0)
            await device.disconnect()

            try await harness.startDaemon()
            let info = try await harness.waitForInfo("late") { $0["properties"]?["switch_1"] == false }
            #expect(info["devId"] == "late")
        }
    }
}

/// On until turned off, read by the streaming devices.
private final class StreamSwitch: Sendable {
    private let on = Atomic<Bool>(true)
    var isOn: Bool { on.load(ordering: .relaxed) }
    func turnOff() { on.store(false, ordering: .relaxed) }
}
