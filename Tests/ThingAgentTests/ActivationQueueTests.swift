import Foundation
import MQTT
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// A flood of activation requests fills the queue of requests waiting to be answered: what does not fit is counted
/// and dropped (and shows in the metrics), never queued without end and never silently lost.
@Suite("Activation requests beyond the queue")
struct ActivationQueueTests {
    @Test("requests beyond the queue's limit are counted as dropped, never queued")
    func requestsBeyondTheQueueAreCounted() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = AgentConfiguration()
        configuration.mqtt.broker = "mqtt://127.0.0.1:1"
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.mqtt.username = "thing-agent"
        configuration.mqtt.password = "unused"
        configuration.provisioning.enabled = true
        // No consumer runs, so every request stays queued, as when the answers cannot keep up.
        let provisioning = try Agent.makeProvisioning(configuration, cache: DeviceCache(), logger: .disabled)
        let extra = 7
        for n in 0..<(Provisioning.queueLimit + extra) {
            let message = MQTTMessage(topic: "things/pair-\(String(format: "%08x", n))/thing/activate",
                                      payload: Array(#"{"msgId":"p","data":{}}"#.utf8), qos: .atLeastOnce)
            #expect(provisioning.accept(message))
        }
        #expect(provisioning.counters.dropped == extra)
        #expect(provisioning.counters.refusals.isEmpty)
        provisioning.finish()
    }
}
