import Foundation
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

@Suite("Metrics settings, text format and health conditions")
struct OperationsUnitTests {
    @Test("the shipped configs serve metrics on loopback and publish events at QoS 1",
          arguments: ["Config/agent.json", "deploy/agent.json"])
    func shippedConfig(file: String) throws {
        var configuration = AgentConfiguration()
        #expect(configuration.metricsAddress == nil, "off by default")
        try configuration.apply(file: repositoryRoot + "/" + file)
        try configuration.checkCombinations()
        let address = try #require(configuration.metricsAddress.flatMap(MetricsAddress.init))
        #expect(address.host == "127.0.0.1")
        #expect(configuration.events.qos == 1)
    }

    @Test("metrics addresses: HOST:PORT, [IPv6]:PORT; anything else is refused")
    func addresses() throws {
        #expect(MetricsAddress("127.0.0.1:9464") == MetricsAddress("127.0.0.1:9464"))
        #expect(MetricsAddress("[::1]:9464")?.host == "::1")
        #expect(MetricsAddress("localhost:1")?.port == 1)
        for bad in ["9464", ":9464", "host:", "host:0", "host:65536", "::1:9464", "a b:1", "host:+1"] {
            #expect(MetricsAddress(bad) == nil, "\(bad)")
        }
        var configuration = AgentConfiguration()
        #expect(throws: AgentConfiguration.Error.self) {
            try configuration.apply(key: "metricsAddress", text: "nope", source: "--metrics")
        }
        #expect(throws: AgentConfiguration.Error.self) {
            try configuration.apply(environment: ["THING_AGENT_EVENTS_QOS": "3"])
        }
        try configuration.apply(environment: ["THING_AGENT_METRICS": "127.0.0.1:9100", "THING_AGENT_EVENTS_QOS": "0"])
        #expect(configuration.metricsAddress == "127.0.0.1:9100")
        #expect(configuration.events.qos == 0)
    }

    @Test("label values are escaped; histograms are cumulative with +Inf, sum and count")
    func textFormat() {
        var text = PrometheusText()
        text.sample("m", [("l", "a\"b\\c\nd")], 1)
        #expect(text.text == "m{l=\"a\\\"b\\\\c\\nd\"} 1\n")
        let histogram = Histogram(bounds: [0.1, 1])
        histogram.record(.milliseconds(50))
        histogram.record(.milliseconds(500))
        histogram.record(.seconds(5))
        var out = PrometheusText()
        out.histogram("h", "help", histogram.snapshot)
        #expect(out.text.contains("h_bucket{le=\"0.1\"} 1\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\n"))
        #expect(out.text.contains("h_sum 5.55\nh_count 3\n"))
    }

    @Test("health: unhealthy while the last write to SQLite failed, healthy again after one succeeds")
    func flushCondition() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                try await waitUntil { agent.health().healthy }
                agent.flusher.status.failed()
                let report = agent.health()
                #expect(!report.healthy)
                #expect(report.checks.first { $0.name == "flush" }?.ok == false)
                agent.flusher.status.succeeded(after: .milliseconds(1))
                #expect(agent.health().healthy)
            }
        }
    }

    @Test("the cache's status tally follows devices as they come, change and go")
    func statusTally() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let message = StatisticsTests.message
                agent.receive(message("things/t1/thing/properties", #"{"time":1764450000000,"data":{"a":1}}"#))
                #expect(agent.cache.statusTally.counts == (0, 0, 1))
                agent.receive(message("things/t1/thing/status", #"{"time":1764450000001,"status":"online"}"#))
                agent.receive(message("things/t2/thing/status", #"{"time":1764450000001,"status":"offline"}"#))
                #expect(agent.cache.statusTally.counts == (1, 1, 0))
                agent.receive(message("things/t2/thing/unbind", #"{"time":1764450000002}"#))
                #expect(agent.cache.statusTally.counts == (1, 0, 0))
            }
        }
    }
}

@Suite("The cache lock names its holder on a machine with many locks")
struct CacheLockHolderTests {
    @Test("the holder's pid is found past the first 4 KiB of /proc/locks")
    func holderFoundAmongManyLocks() throws {
        let directory = try makeTemporaryDirectory("many-locks")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = directory + "/cache.sqlite"
        let first = try CacheLock(cache: cache, holder: .daemon(clientID: "unit-daemon"))
        // More locks after it: /proc/locks lists the newest first, so the holder's line is then past the first
        // 4 KiB, all that one read of a /proc file gives.
        var descriptors: [Int32] = []
        defer { descriptors.forEach { close($0) } }
        for n in 0..<150 {
            let fd = open("\(directory)/other-\(n)", O_RDWR | O_CREAT, 0o600)
            if fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 { descriptors.append(fd) }
        }
        #expect(descriptors.count == 150)
        let held = #expect(throws: CacheLock.Held.self) { _ = try CacheLock(cache: cache, holder: .command("edit")) }
        #expect(held?.holder == getpid(), "\(String(describing: held))")
        #expect(held?.heldBy == .daemon(clientID: "unit-daemon"))
        _ = first
    }

    @Test("the lock file says what holds it; a name left by an earlier holder is not taken for the current one")
    func theFileNamesTheHolder() throws {
        #expect(CacheLock.parse(CacheLock.text(.command("set"), pid: 42)) == (.command("set"), 42))
        #expect(CacheLock.parse(CacheLock.text(.daemon(clientID: "agent 1"), pid: 7)) == (.daemon(clientID: "agent 1"), 7))
        // The form before the holder was named: the daemon's client id alone.
        #expect(CacheLock.parse("agent-1") == (.daemon(clientID: "agent-1"), nil))
        #expect(CacheLock.parse("") == (nil, nil))

        let directory = try makeTemporaryDirectory("stale-lock")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = directory + "/cache.sqlite"
        // A daemon that crashed left its name; the next holder has taken the lock but not written yet.
        try CacheLock.text(.daemon(clientID: "gone"), pid: 999_999).write(toFile: cache + ".lock", atomically: false,
                                                                          encoding: .utf8)
        let fd = open(cache + ".lock", O_RDWR)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let held = #expect(throws: CacheLock.Held.self) { _ = try CacheLock(cache: cache, holder: .command("edit")) }
        #expect(held?.heldBy == nil && held?.owner == nil, "\(String(describing: held))")
        #expect(held?.written == .daemon(clientID: "gone"))
        #expect(held?.description.contains("in use by another process with pid \(getpid())") == true)
    }

    /// The holder truncates the file and then writes it: a reader racing that write sees a prefix of the text.
    @Test("a lock file read half-written names no holder yet, never a cut-off client id")
    func aHalfWrittenLockFileIsNotYetKnown() throws {
        let directory = try makeTemporaryDirectory("half-written-lock")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = directory + "/cache.sqlite"
        let clientID = "thing-agent-gateway-7"
        let daemon = try CacheLock(cache: cache, holder: .daemon(clientID: clientID))
        defer { daemon.release() }
        let full = Array(CacheLock.text(.daemon(clientID: clientID), pid: getpid()).utf8)
        let writer = open(cache + ".lock", O_WRONLY)
        #expect(writer >= 0)
        defer { close(writer) }
        var named = 0
        for length in 0...full.count {
            #expect(ftruncate(writer, 0) == 0)
            #expect(pwrite(writer, full, length, 0) == length)
            let held = #expect(throws: CacheLock.Held.self) { _ = try CacheLock(cache: cache, holder: .command("edit")) }
            let prefix = String(decoding: full[..<length], as: UTF8.self)
            for name in [held?.heldBy, held?.written, CacheLock.currentHolder(cache: cache)?.heldBy] {
                #expect(name == nil || name == .daemon(clientID: clientID), "after \(length) bytes, \(prefix.debugDescription): \(String(describing: name))")
            }
            if held?.heldBy == .daemon(clientID: clientID) { named += 1 }
        }
        #expect(named == 1, "only the whole text names the daemon")
        // Spaces that are part of a client id are kept; only the one after the colon is the format's.
        #expect(CacheLock.parse("holder: daemon\npid: 7\nclient-id:  padded\n") == (.daemon(clientID: " padded"), 7))
    }

    @Test("a lock let go is emptied: the file names no one once its holder has gone")
    func aReleasedLockNamesNoOne() throws {
        let directory = try makeTemporaryDirectory("released-lock")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = directory + "/cache.sqlite"
        var lock: CacheLock? = try CacheLock(cache: cache, holder: .command("set"))
        #expect(try String(contentsOfFile: cache + ".lock", encoding: .utf8).contains("command: set"))
        _ = lock
        lock = nil
        #expect(try String(contentsOfFile: cache + ".lock", encoding: .utf8).isEmpty)
    }
}
