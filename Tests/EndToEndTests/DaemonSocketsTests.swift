import Foundation
import Testing
import TestSupport

/// What the daemon holds open for its broker connection: the connection itself. libmosquitto would make a
/// socket pair per client besides, for `mosquitto_loop`'s select to wake on, and write a byte into it for every
/// packet it queues; the agent runs its own loop, and the library is left without the pair.
@Suite("The daemon's sockets", .timeLimit(.minutes(1)))
struct DaemonSocketsTests {
    @Test("connected, the daemon holds one socket: its connection to the broker")
    func oneSocketPerConnection() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            try await harness.startDaemon()
            let daemon = try #require(harness.daemon)
            let directory = "/proc/\(daemon.pid)/fd"
            let targets = try FileManager.default.contentsOfDirectory(atPath: directory).compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + $0)
            }
            let sockets = targets.filter { $0.hasPrefix("socket:") }
            #expect(sockets.count == 1, "open files: \(targets.sorted())")
            try await harness.stopDaemon()
        }
    }
}
