import Foundation
import JSON
import Testing
import TestSupport

/// `thing-agent action`: the real executable, a real broker, a device that answers `action/execute`; with and
/// without the daemon.
@Suite("thing-agent action", .serialized)
struct ActionCommandTests {
    @Test(.timeLimit(.minutes(2)))
    func anActionIsAnsweredWithItsOutputAndARefusalIsExit4() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            let device = try SimulatedDevice("lamp", brokerURL: broker.url)
            try await device.connect()
            try await device.status(true, time: t0)
            let answering = try await device.answer("action/execute") { text in
                text.contains(#""actionCode":"identify""#)
                    ? #""code":0,"data":{"outputParams":{"blinked":5}}"#
                    : #""code":1004,"message":"unknown action""#
            }
            // Without a daemon the command sends it itself; with one, through its API.
            for daemon in [false, true] {
                if daemon { try await harness.startDaemon() }
                let done = try await harness.cli(["action", "lamp", "identify", "times=5"])
                #expect(done.status == 0, "\(done.stdout) \(done.stderr)")
                #expect(done.stdout.contains("lamp: identify done") && done.stdout.contains("blinked = 5"), "\(done.stdout)")
                let json = try await harness.cli(["action", "lamp", "identify", "--json"])
                #expect(try JSONParser.parse(json.stdout)["outputParams"]?["blinked"] == 5, "\(json.stdout)")
                let refused = try await harness.cli(["action", "lamp", "selfdestruct"])
                #expect(refused.status == 4, "\(refused.stdout) \(refused.stderr)")
                #expect(refused.stderr.contains("unknown action"), "\(refused.stderr)")
            }
            let bad = try await harness.cli(["action", "lamp", "no/such"])
            #expect(bad.status == 3, "an invalid name: \(bad.stderr)")
            let usage = try await harness.cli(["action", "lamp"])
            #expect(usage.status == 2, "\(usage.stderr)")
            answering.cancel()
            await device.disconnect()
        }
    }
}
