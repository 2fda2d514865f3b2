import Foundation
import JSON
import Synchronization
import TestSupport
@testable import ThingAgent

/// docs/protocol.md's example model, plus a stepped value and a set-only property so that every rule can be tested.
let testLightModel = """
    {"productId":"p-light-1","properties":[
      {"code":"switch_1","type":"bool","access":"rw"},
      {"code":"bright_value","type":"value","min":10,"max":1000,"step":1,"access":"rw"},
      {"code":"mode","type":"enum","range":["white","colour","scene"],"access":"rw"},
      {"code":"temp_current","type":"value","min":-200,"max":1000,"access":"ro"},
      {"code":"label","type":"string","maxlen":32,"access":"rw"},
      {"code":"colour_temp","type":"value","min":0,"max":1000,"step":10,"access":"rw"},
      {"code":"reset","type":"bool","access":"wo"}]}
    """

/// Log lines written during a test.
final class LogCapture: Sendable {
    private let captured = Mutex<[String]>([])

    var lines: [String] { captured.withLock { $0 } }

    var logger: AgentLogger {
        AgentLogger(label: "test", level: .debug, handler: TextLogHandler { [self] line in
            captured.withLock { $0.append(line) }
        })
    }
}

/// An agent (service role) on a test broker with its cache and thing models in a temporary directory.
enum CommandFixture {
    static func withAgent(
        _ broker: MosquittoBroker, models: [String] = [], logger: AgentLogger = .disabled,
        configure: (inout AgentConfiguration) -> Void = { _ in }, _ body: (Agent) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentTests.configuration(broker, directory: directory)
        if !models.isEmpty {
            let modelsDirectory = directory + "/models"
            try FileManager.default.createDirectory(atPath: modelsDirectory, withIntermediateDirectories: true)
            for (index, model) in models.enumerated() {
                try model.write(toFile: "\(modelsDirectory)/model\(index).json", atomically: true, encoding: .utf8)
            }
            configuration.modelsDirectory = modelsDirectory
        }
        configure(&configuration)
        try await Agent(configuration: configuration, logger: logger).whileRunning(body)
    }

    /// A connected simulated device, announced with `productId` (when given) and `online`, known to the agent.
    static func device(_ id: String, _ broker: MosquittoBroker, agent: Agent, productId: String? = nil,
                       online: Bool = true) async throws -> SimulatedDevice {
        let device = try SimulatedDevice(id, brokerURL: broker.url)
        try await device.connect()
        if let productId { try await device.info(#"{"productId":"\#(productId)"}"#, time: t0) }
        try await device.status(online, time: t0)
        try await waitUntil {
            agent.cache.device(id)?.online == online && (productId == nil || agent.thingModel(for: id) != nil
                || agent.cache.device(id)?.info.productId == productId)
        }
        return device
    }
}
