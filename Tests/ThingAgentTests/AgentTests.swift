import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The library API in process, against a real broker and a real cache file.
@Suite("Agent library API", .serialized)
struct AgentTests {
    /// An embedded agent takes the cache's lock, as the daemon does: a second one on the same file is refused with
    /// the holder named, before it replays or writes anything; once the first has stopped, the file is free.
    @Test(.timeLimit(.minutes(1)))
    func anEmbeddedAgentTakesTheCacheLockAndASecondIsRefused() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { first, directory in
                var second = agentConfiguration(broker, directory: directory)
                second.mqtt.clientID = "dashboard"
                #expect {
                    _ = try Agent(configuration: second)
                } throws: { error in
                    let held = error as? CacheLock.Held
                    return held?.owner == first.configuration.mqtt.clientID && held?.holder == getpid()
                        && "\(error)".contains("in use by the daemon with pid \(getpid())")
                }
                // Read-only use stays possible beside it.
                let devices = try CacheReader(path: second.cache.database).devices()
                #expect(devices.isEmpty)
            }
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let configuration = agentConfiguration(broker, directory: directory)
            let running = try Agent(configuration: configuration)
            let task = Task { try await running.run() }
            try await running.waitUntilConnected(timeout: .seconds(10))
            task.cancel()
            try await task.value
            // Stopped: the lock is free for the next writer.
            _ = try Agent(configuration: configuration)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func deviceInfoIsInstantAndFetchDataUpdatesIt() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let manager = DeviceInfoManager(deviceId: "bf12ab", agent: agent)
                #expect(manager.deviceInfo == nil)
                let device = try SimulatedDevice("bf12ab", brokerURL: broker.url)
                try await device.connect()
                let answering = try await device.answer("info/get") { _ in
                    #""code":0,"data":{"name":"Hall light","firmwareVersion":"1.4.3","hardwareInfo":{"module":"WBR3"}}"#
                }
                try await device.status(true, time: t0)
                try await waitUntil { manager.snapshot?.online == true }
                let info = try await manager.fetchData()
                #expect(info.name == "Hall light")
                #expect(info.firmwareVersion == "1.4.3")
                #expect(info.hardwareInfo?["module"] == "WBR3")
                #expect(manager.deviceInfo?.firmwareVersion == "1.4.3")
                answering.cancel()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func fetchDataFailsAtOnceWhenOfflineAndTimesOutWhenSilent() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let device = try SimulatedDevice("quiet", brokerURL: broker.url)
                try await device.connect()
                try await device.status(true, time: t0)
                let manager = DeviceInfoManager(deviceId: "quiet", agent: agent)
                try await waitUntil { manager.snapshot?.online == true }
                // The error names the call's 0.3 s, not the configured 2 s: the call's timeout is the one that ran.
                await #expect(throws: RequestError.timeout(deviceId: "quiet", request: "info/get", seconds: 0.3)) {
                    try await manager.fetchData(timeout: .milliseconds(300))
                }

                try await device.status(false, time: t0 + 1)
                try await waitUntil { manager.snapshot?.online == false }
                // An hour's timeout: a call that waited for an answer instead of failing at once would run into
                // the test's time limit.
                await #expect(throws: RequestError.deviceOffline(deviceId: "quiet")) {
                    try await manager.fetchData(timeout: .seconds(3600))
                }
                await device.disconnect()
            }
        }
    }

    /// Where a recorder writes what it heard; outlives the recorder so a released listener can be checked.
    final class SignalLog: Sendable {
        private let received = Mutex<[Int]>([])
        var values: [Int] { received.withLock { $0 } }
        func append(_ value: Int) { received.withLock { $0.append(value) } }
    }

    final class SignalRecorder: DeviceInfoManagerListener {
        let log: SignalLog
        init(_ log: SignalLog) { self.log = log }

        func deviceInfoManager(_ manager: DeviceInfoManager, wifiSignalDidUpdate signal: SignalReading) {
            log.append(signal.dBm)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func wifiSignalListenersHearUpdatesUntilRemovedOrReleased() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                // The agent's own listeners (the event publisher) stay registered.
                let baseline = agent.events.listenerCount
                let manager = DeviceInfoManager(deviceId: "sig", agent: agent)
                let keptLog = SignalLog(), releasedLog = SignalLog()
                let kept = SignalRecorder(keptLog)
                var released: SignalRecorder? = SignalRecorder(releasedLog)
                weak let weakReleased = released
                manager.addListener(kept)
                manager.addListener(released!)
                let device = try SimulatedDevice("sig", brokerURL: broker.url)
                try await device.connect()
                try await device.signal(wifi: -40, time: t0)
                try await waitUntil { keptLog.values == [-40] && releasedLog.values == [-40] }

                released = nil
                #expect(weakReleased == nil, "the manager must not keep a listener alive")
                try await device.signal(wifi: -45, time: t0 + 1)
                try await waitUntil { keptLog.values == [-40, -45] }
                #expect(releasedLog.values == [-40])

                manager.removeListener(kept)
                try await device.signal(wifi: -50, time: t0 + 2)
                try await device.signal(wifi: -50, rsrp: nil, time: t0 + 3)
                try await waitUntil { agent.cache.device("sig")?.wifiSignal?.time == t0 + 3 }
                try await Task.sleep(for: .milliseconds(100))
                #expect(keptLog.values == [-40, -45])
                try await waitUntil { agent.events.listenerCount == baseline }
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theSameListenerAddedTwiceHearsEveryUpdateOnce() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let baseline = agent.events.listenerCount
                let manager = DeviceInfoManager(deviceId: "twice", agent: agent)
                let log = SignalLog()
                let recorder = SignalRecorder(log)
                manager.addListener(recorder)
                manager.addListener(recorder)
                let device = try SimulatedDevice("twice", brokerURL: broker.url)
                try await device.connect()
                try await device.signal(wifi: -40, time: t0)
                try await waitUntil(timeout: .seconds(30)) { log.values == [-40] }
                // The replaced registration has ended by now; the one that replaced it must still hear.
                try await waitUntil(timeout: .seconds(30)) { agent.events.listenerCount == baseline + 1 }
                try await device.signal(wifi: -41, time: t0 + 1)
                try await device.signal(wifi: -42, time: t0 + 2)
                try await waitUntil(timeout: .seconds(30)) { log.values == [-40, -41, -42] }
                manager.removeListener(recorder)
                try await waitUntil(timeout: .seconds(30)) { agent.events.listenerCount == baseline }
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aReleasedListenerReplacedByANewOneLeavesTheNewOneHearing() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let manager = DeviceInfoManager(deviceId: "reuse", agent: agent)
                let oldLog = SignalLog(), newLog = SignalLog()
                var old: SignalRecorder? = SignalRecorder(oldLog)
                manager.addListener(old!)
                let oldAddress = ObjectIdentifier(old!)
                old = nil
                // A new listener at the released one's address (the allocator hands a freed block back first),
                // registered before any event woke the released one's registration.
                var candidates: [SignalRecorder] = []
                var fresh = SignalRecorder(newLog)
                while ObjectIdentifier(fresh) != oldAddress, candidates.count < 1000 {
                    candidates.append(fresh)
                    fresh = SignalRecorder(newLog)
                }
                candidates.removeAll()
                manager.addListener(fresh)
                let device = try SimulatedDevice("reuse", brokerURL: broker.url)
                try await device.connect()
                for n in 0..<3 {
                    try await device.signal(wifi: -40 - n, time: t0 + Int64(n))
                }
                try await waitUntil(timeout: .seconds(30)) { newLog.values == [-40, -41, -42] }
                #expect(oldLog.values.isEmpty)
                manager.removeListener(fresh)
                await device.disconnect()
            }
        }
    }

    /// An embedding app's own log backend: it gets each record whole, not a formatted line.
    final class RecordingLogHandler: AgentLogHandler {
        struct Record: Sendable {
            let level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata
        }
        private let records = Mutex<[Record]>([])
        var all: [Record] { records.withLock { $0 } }
        func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata) {
            records.withLock { $0.append(Record(level: level, label: label, message: message, metadata: metadata)) }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func anEmbeddingAppsHandlerGetsLevelMessageAndMetadata() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let handler = RecordingLogHandler()
            let logger = AgentLogger(label: "fleet", level: .info, handler: handler)
            let agent = try Agent(configuration: agentConfiguration(broker, directory: directory), logger: logger)
            let running = Task { try await agent.run() }
            // Subscribed, not only connected: a report published before the SUBACK would not reach it.
            try await waitUntil(timeout: .seconds(30)) { handler.all.contains { $0.message == "connected and subscribed" } }
            let device = try SimulatedDevice("noisy", brokerURL: broker.url)
            try await device.connect()
            try await device.publish("properties", "{not json")
            try await waitUntil(timeout: .seconds(30)) { handler.all.contains { $0.metadata["reason"] == "malformed" } }
            let dropped = try #require(handler.all.first { $0.metadata["reason"] == "malformed" })
            #expect(dropped.level == .warning)
            #expect(dropped.label == "fleet")
            #expect(dropped.message.hasPrefix("dropped a message"))
            #expect(dropped.metadata["topic"] == "things/noisy/thing/properties")
            #expect(!handler.all.contains { $0.level < .info }, "below the logger's level: not handed on")
            await device.disconnect()
            running.cancel()
            _ = try? await running.value
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func slowListenerNeverBlocksIngestOrOthers() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let blocked = Mutex(false)
                let stuck = agent.events.addListener(kinds: .properties, queueLimit: 8) { _ in
                    blocked.withLock { $0 = true }
                    try? await Task.sleep(for: .seconds(3600))
                }
                let fastCount = Atomic<Int>(0)
                let fast = agent.events.addListener(kinds: .properties) { _ in fastCount.add(1, ordering: .relaxed) }
                let device = try SimulatedDevice("busy", brokerURL: broker.url)
                try await device.connect()
                for n in 1...100 {
                    try await device.properties("{\"n\":\(n)}", time: t0 + Int64(n))
                }
                try await waitUntil { fastCount.load(ordering: .relaxed) == 100 }
                #expect(agent.cache.device("busy")?.properties["n"]?.value == 100)
                // The stuck listener took its first batch (the events of one dispatch, at least one), 8 more queued,
                // and the rest were dropped and counted.
                #expect((100 - 8 - 50)...(100 - 8 - 1) ~= agent.events.dropped)
                #expect(blocked.withLock { $0 })
                stuck.cancel()
                fast.cancel()
                await device.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func offlineWarningAfterTheGracePeriodAndNotBefore() async throws {
        let grace = 1.5
        try await withBroker { broker in
            try await withAgent(broker, configure: { $0.offlineGracePeriod = .seconds(grace) }) { agent in
                // Each warning with the wall time it arrived, to compare with the agent's offline time.
                let warnings = Mutex<[(id: String, offlineSince: Int64, heardAt: Int64)]>([])
                let listener = agent.events.addListener(kinds: .offlineWarning) { event in
                    guard case .offlineWarning(let id, let since) = event else { return }
                    warnings.withLock { $0.append((id, since, Timestamp.current)) }
                }
                let gone = try SimulatedDevice("gone", brokerURL: broker.url)
                let blip = try SimulatedDevice("blip", brokerURL: broker.url)
                try await gone.connect()
                try await blip.connect()
                try await gone.status(true, time: t0)
                try await blip.status(true, time: t0)
                try await waitUntil { agent.cache.device("blip")?.online == true && agent.cache.device("gone")?.online == true }

                let offlineAt = Timestamp.current
                try await gone.status(false, time: t0 + 10)
                try await blip.status(false, time: t0 + 10)
                try await waitUntil { agent.cache.device("blip")?.online == false }
                try await Task.sleep(for: .milliseconds(300))
                try await blip.status(true, time: t0 + 20)
                try await waitUntil { agent.cache.device("blip")?.online == true }
                let blipOffline = Double(Timestamp.current - offlineAt) / 1000

                try await waitUntil(timeout: .seconds(10)) { warnings.withLock { $0.contains { $0.id == "gone" } } }
                try await Task.sleep(for: .seconds(grace))
                let seen = warnings.withLock { $0 }
                #expect(seen.filter { $0.id == "gone" }.count == 1, "exactly one warning for the device that stayed offline")
                for warning in seen {
                    #expect(Double(warning.heardAt - warning.offlineSince) / 1000 >= grace - 0.05,
                            "no warning before the grace period: \(warning)")
                }
                // Back within the grace period: no warning (checkable only when the machine kept the timing).
                if blipOffline < grace - 0.2 {
                    #expect(!seen.contains { $0.id == "blip" }, "back after \(blipOffline) s, within the grace period")
                }
                listener.cancel()
                await gone.disconnect()
                await blip.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func cacheIsReadBeforeTheBrokerIsReached() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withBroker { broker in
            var configuration = agentConfiguration(broker, directory: directory)
            configuration.mqtt.clientID = "restart-test"
            let agent = try Agent(configuration: configuration)
            let running = try await agent.runUntilSubscribed()
            let device = try SimulatedDevice("keep", brokerURL: broker.url)
            try await device.connect()
            try await device.info(#"{"name":"Kept"}"#, time: t0)
            try await device.properties(#"{"level":7}"#, time: t0)
            try await waitUntil { agent.cache.device("keep")?.properties["level"] != nil }
            running.cancel()
            _ = try? await running.value
            await device.disconnect()
        }
        // The broker is gone; a new agent answers from the cache file at once, before any connection.
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.mqtt.broker = "mqtt://127.0.0.1:\(try freeLoopbackPort())"
        let agent = try Agent(configuration: configuration)
        let manager = DeviceInfoManager(deviceId: "keep", agent: agent)
        #expect(manager.deviceInfo?.name == "Kept")
        #expect(manager.snapshot?.properties["level"]?.value == 7)
        await #expect(throws: (any Error).self) { try await agent.start() }
    }
}
