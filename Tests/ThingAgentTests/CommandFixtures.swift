import Foundation
import JSON
import Synchronization
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The shipped light model (Config/models/p-light-1.json, docs/protocol.md's example) plus two properties it lacks,
/// so that every rule can be tested: a stepped value (`colour_temp`, step 10) and a set-only property (`reset`,
/// access wo). Deliberately not the shipped model alone; the tests that need neither property use that one
/// (`shippedModel("p-light-1")`).
func testLightModel() throws -> String {
    guard var model = try JSONParser.parse(try shippedModel("p-light-1")).objectValue,
          let properties = model["properties"]?.arrayValue
    else { throw TestSupportError("Config/models/p-light-1.json is not a thing model") }
    model["properties"] = .array(properties + [
        ["code": "colour_temp", "type": "value", "min": 0, "max": 1000, "step": 10, "access": "rw"],
        ["code": "reset", "type": "bool", "access": "wo"],
    ])
    return JSONValue.object(model).serialized()
}

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

/// Simulated devices for the tests that run an agent with `withAgent` (TestSupport).
enum CommandFixture {
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
