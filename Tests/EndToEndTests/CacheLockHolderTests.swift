import Foundation
import JSON
import Testing
import TestSupport

/// The lock file says what holds the cache: the daemon, or a command doing the daemon's work while none runs. A
/// refusal names the holder as what it is; a command facing another command waits for it or says so, and a daemon
/// waits for it, saying so; neither asks a daemon that is not there.
@Suite("the cache lock names its holder")
struct CacheLockHolderTests {
    @Test(.timeLimit(.minutes(2)))
    func aCommandHoldingTheCacheIsNamedAsThatCommand() async throws {
        try await withBroker { broker in
            let harness = try AgentHarness(broker: broker)
            // A device known online that never answers a set, so that `set` holds the cache while it waits.
            try await harness.startDaemon()
            let (device, answering) = try await SetCommandTests.device("mute", broker, answer: nil)
            _ = try await harness.waitForInfo("mute") { $0["online"] == true }
            try await harness.stopDaemon()
            let stopped = try String(contentsOfFile: harness.database + ".lock", encoding: .utf8)
            #expect(stopped.isEmpty, "a stopped daemon's lock file still names it: \(stopped)")

            let set = try DaemonProcess(thingAgentExecutable(), [
                "set", "mute", "switch_1=true", "--timeout", "120", "--broker", broker.url, "--db", harness.database,
            ], logPath: harness.directory + "/set.log")
            try await waitUntil(timeout: .seconds(30)) {
                (try? String(contentsOfFile: harness.database + ".lock", encoding: .utf8))?.contains("command: set") == true
            }
            let lockText = try String(contentsOfFile: harness.database + ".lock", encoding: .utf8)
            #expect(lockText.contains("holder: command") && lockText.contains("pid: \(set.pid)"), "\(lockText)")

            // A daemon started meanwhile waits for the command, naming it and its pid, not a daemon.
            let run = try DaemonProcess(thingAgentExecutable(), [
                "run", "--broker", broker.url, "--db", harness.database, "--client-id", harness.clientID + "-2",
            ], logPath: harness.directory + "/run-2.log")
            try await waitUntil(timeout: .seconds(30)) { run.log.contains("waiting for it") || !run.isRunning }
            #expect(run.log.contains("in use by the command 'thing-agent set' with pid \(set.pid)"), "\(run.log)")
            #expect(!run.log.contains("the daemon with pid"), "\(run.log)")

            // A write waits for the command a moment, then says that a command holds the cache; no daemon is asked.
            let edit = try await harness.cli(["edit", "mute", "--room", "Attic"])
            #expect(edit.status == 1)
            #expect(edit.stderr.contains("in use by the command 'thing-agent set' with pid \(set.pid)"), "\(edit.stderr)")
            #expect(!edit.stderr.contains("did not answer") && !edit.stderr.contains("goes through it"), "\(edit.stderr)")
            #expect(set.isRunning, "the set ended before the checks: \(set.log)")
            #expect(try await harness.info("mute")?["room"] != "Attic")

            // Once the command has ended, the waiting daemon starts and the write goes through it.
            set.signal(SIGKILL)
            #expect(await set.waitForExit(timeout: DaemonProcess.hangBound) != nil)
            try await waitUntil(timeout: .seconds(30)) { run.log.contains("connected and subscribed") || !run.isRunning }
            #expect(run.isRunning, "\(run.log)")
            let after = try await harness.cli(["edit", "mute", "--room", "Attic"])
            #expect(after.status == 0, "\(after.stderr)")
            #expect(try await harness.info("mute")?["room"] == "Attic")
            run.signal(SIGTERM)
            #expect(await run.waitForExit(timeout: .seconds(20)) == 0)
            answering.cancel()
            await device.disconnect()
        }
    }
}
