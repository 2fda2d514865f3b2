import Foundation
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// What the daemon's systemd integration and SIGHUP rely on: liveness, reload, and the logger's shared level and
/// line formats.
@Suite("liveness, reload and log lines", .serialized)
struct OperationsTests {
    @Test(.timeLimit(.minutes(1)))
    func aliveOnlyWhileTheReceivePathAndTheFlusherGoRound() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let agent = try Agent(configuration: agentConfiguration(broker, directory: directory))
            #expect(!agent.isAlive(within: .seconds(5)), "nothing runs before start")
            try await agent.start()
            #expect(agent.isAlive(within: .seconds(5)))
            #expect(agent.statusLine == "0 devices; broker connected to \(broker.url)")
            // The flusher stopped (as if stuck): no longer alive, though the network thread still runs.
            agent.flusher.stop()
            #expect(agent.client.networkThreadIdle != nil)
            #expect(!agent.isAlive(within: .seconds(5)))
            await agent.stop()
            #expect(agent.client.networkThreadIdle == nil)
            #expect(!agent.isAlive(within: .seconds(5)))
        }
    }

    @Test func reloadReplacesWhatReadsCleanlyAndKeepsTheRest() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let models = directory + "/models"
        try FileManager.default.copyItem(atPath: shippedModelsDirectory(), toPath: models)
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.modelsDirectory = models
        let agent = try Agent(configuration: configuration)
        #expect(agent.models.byProduct.count == 7)

        try FileManager.default.removeItem(atPath: models + "/p-plug-1.json")
        var next = configuration
        next.scenesFile = TestSupport.repositoryRoot() + "/Config/scenes.json"
        let report = agent.reload(next)
        #expect(report.kept.isEmpty, "\(report.kept)")
        #expect(agent.models.model(for: "p-plug-1") == nil)
        #expect(agent.models.byProduct.count == 6)

        try "[".write(toFile: models + "/p-bad.json", atomically: true, encoding: .utf8)
        next.detailConfig = directory + "/missing.json"
        let broken = agent.reload(next)
        #expect(broken.kept.count == 2, "\(broken.kept)")
        #expect(broken.kept.contains { $0.contains("p-bad.json") })
        #expect(agent.models.byProduct.count == 6, "the previous models stay")
        #expect(agent.detailConfig == .standard)
    }

    @Test func aSharedLevelChangeReachesEveryCopyButASetLevelOnlyItsOwn() {
        let lines = Mutex<[String]>([])
        let logger = AgentLogger(label: "t", level: .warning, handler: TextLogHandler(priorityPrefix: true) { line in
            lines.withLock { $0.append(line) }
        })
        let copy = logger
        copy.info("hidden")
        logger.changeSharedLevel(to: .info)
        copy.info("shown")
        var own = copy
        own.logLevel = .error
        own.warning("own level")
        copy.warning("still shared")
        let written = lines.withLock { $0 }
        #expect(written.count == 2, "\(written)")
        #expect(written.first?.hasPrefix("<6>") == true && written.first?.contains("shown") == true)
        #expect(written.last?.hasPrefix("<4>") == true && written.last?.contains("still shared") == true)
    }

    @Test func jsonLinesTypeNumbersButKeepIdentifiersAsStrings() throws {
        let lines = Mutex<[String]>([])
        let logger = AgentLogger(label: "t", handler: JSONLogHandler { line in lines.withLock { $0.append(line) } })
        logger.info("m", metadata: ["devices": "28", "ratio": "0.5", "device": "42", "msgId": "1001",
                                    "broker": "mqtt://h:1", "padded": "007"])
        let line = try #require(lines.withLock { $0.first })
        #expect(line.contains(#""devices":28"#), "\(line)")
        #expect(line.contains(#""ratio":0.5"#), "\(line)")
        #expect(line.contains(#""device":"42""#), "\(line)")
        #expect(line.contains(#""msgId":"1001""#), "\(line)")
        #expect(line.contains(#""padded":"007""#), "\(line)")
        #expect(line.range(of: #""time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z""#, options: .regularExpression) != nil,
                "\(line)")
    }
}
