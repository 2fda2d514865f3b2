import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// deploy/mosquitto.conf and deploy/mosquitto.acl in the real mosquitto: every rule allows what its comment says
/// and denies the rest.
@Suite("the shipped broker configuration", .serialized)
struct ShippedBrokerConfigTests {
    static let fleet = ["dev1", "dev2", "gw-example", "sub-example-1", "svc-dashboard", "svc-other"]
    static let agentSide = ["thing-agent", "thing-agent-cli"]

    static func broker() async throws -> ShippedBroker {
        try await ShippedBroker(fleetUsers: fleet, agentUsers: agentSide)
    }

    /// The agent's user on its listener, reading everything it may read: the witness of device writes.
    static func agentObserver(_ broker: ShippedBroker) async throws -> BrokerProbe {
        try await BrokerProbe.connect(try broker.client("thing-agent", agentListener: true),
                                      subscribing: ["things/+/thing/#", "thing-agent/#"])
    }

    @Test(.timeLimit(.minutes(1)))
    func aDeviceWritesOnlyItsOwnTopicsAndReadsOnlyItsOwnRequests() async throws {
        let broker = try await Self.broker()
        defer { broker.stop() }
        let agent = try await Self.agentObserver(broker)
        let device = try broker.client("dev1")
        try await device.connect()
        let own = "things/dev1/thing/status"
        for suffix in ["properties", "status", "signal", "info", "gateway/transfer/status", "properties/set_response",
                       "info/get_response", "wifi/scan_response", "gateway/transfer/start_response"] {
            #expect(try await reaches(device, "things/dev1/thing/\(suffix)", agent, marker: own), "own \(suffix)")
        }
        for topic in ["things/dev2/thing/properties", "things/dev2/thing/status", "things/dev2/thing/info",
                      "things/dev1/thing/properties/set", "things/dev1/thing/unbind", "things/dev2/thing/unbind",
                      "thing-agent/events/dev1/properties", "thing-agent/api/thing-agent/request/set",
                      "thing-agent/agents/thing-agent/status", "thing-agent/replies/svc-dashboard/1"] {
            #expect(try await !reaches(device, topic, agent, marker: own), "\(topic) must be denied")
        }

        let readable = ["properties/set", "info/get", "wifi/scan", "gateway/transfer/start", "unbind"]
            .map { "things/dev1/thing/\($0)" }
        let unreadable = ["things/dev2/thing/properties/set", "things/dev1/thing/status", "thing-agent/events/x/status",
                          "thing-agent/replies/svc-dashboard/1"]
        // One connection per user on the fleet listener (the client id is the user name): the writer goes first.
        await device.disconnect()
        let reader = try await BrokerProbe.connect(try broker.client("dev1"), subscribing: readable + unreadable)
        let agentWriter = try broker.client("thing-agent", agentListener: true)
        try await agentWriter.connect()
        let marker = "things/dev1/thing/info/get"
        for topic in readable {
            #expect(try await reaches(agentWriter, topic, reader, marker: marker), "\(topic)")
        }
        for topic in unreadable {
            #expect(try await !reaches(agentWriter, topic, reader, marker: marker), "\(topic) must not be read")
        }
        await reader.disconnect()
        await agentWriter.disconnect()
        await agent.disconnect()
    }

    @Test(.timeLimit(.minutes(1)))
    func aGatewayAlsoWritesTheTopicsOfTheSubDevicesItsBlockNames() async throws {
        let broker = try await Self.broker()
        defer { broker.stop() }
        let agent = try await Self.agentObserver(broker)
        let gateway = try broker.client("gw-example")
        try await gateway.connect()
        let own = "things/gw-example/thing/status"
        for suffix in ["properties", "status", "signal", "info", "properties/set_response", "info/get_response",
                       "wifi/scan_response"] {
            #expect(try await reaches(gateway, "things/sub-example-1/thing/\(suffix)", agent, marker: own), "\(suffix)")
        }
        #expect(try await reaches(gateway, "things/gw-example/thing/gateway/transfer/status", agent, marker: own))
        for topic in ["things/dev1/thing/info", "things/dev1/thing/properties", "things/sub-example-1/thing/unbind",
                      "things/sub-example-1/thing/properties/set"] {
            #expect(try await !reaches(gateway, topic, agent, marker: own), "\(topic) must be denied")
        }
        await gateway.disconnect()
        let reader = try await BrokerProbe.connect(try broker.client("gw-example"), subscribing: [
            "things/sub-example-1/thing/properties/set", "things/sub-example-1/thing/info/get",
            "things/dev1/thing/properties/set",
        ])
        let agentWriter = try broker.client("thing-agent", agentListener: true)
        try await agentWriter.connect()
        let marker = "things/sub-example-1/thing/properties/set"
        #expect(try await reaches(agentWriter, "things/sub-example-1/thing/info/get", reader, marker: marker))
        #expect(try await !reaches(agentWriter, "things/dev1/thing/properties/set", reader, marker: marker))
        await reader.disconnect()
        await agentWriter.disconnect()
        await agent.disconnect()
    }

    @Test(.timeLimit(.minutes(1)))
    func aServiceReachesTheAPIAndTheEventsAndNothingElse() async throws {
        let broker = try await Self.broker()
        defer { broker.stop() }
        let agent = try await Self.agentObserver(broker)
        let service = try broker.client("svc-dashboard")
        try await service.connect()
        let own = "thing-agent/api/thing-agent/request/info"
        for method in ["info", "devices", "set", "detail"] {
            #expect(try await reaches(service, "thing-agent/api/thing-agent/request/\(method)", agent, marker: own))
        }
        for topic in ["things/dev1/thing/properties/set", "things/dev1/thing/properties", "things/dev1/thing/unbind",
                      "thing-agent/events/dev1/properties", "thing-agent/replies/svc-dashboard/1",
                      "thing-agent/agents/thing-agent/status", "thing-agent/api/other-agent/request/info"] {
            #expect(try await !reaches(service, topic, agent, marker: own), "\(topic) must be denied")
        }
        // As a service subscribes: the feed, its answers, the announcement; and what it must not see.
        let unreadable = ["thing-agent/replies/svc-other/r1", "things/dev1/thing/properties/set",
                          "thing-agent/api/thing-agent/request/info", "things/dev1/thing/status"]
        await service.disconnect()
        let reader = try await BrokerProbe.connect(try broker.client("svc-dashboard"), subscribing: [
            "thing-agent/events/#", "thing-agent/replies/svc-dashboard/#", "thing-agent/agents/+/status",
            "thing-agent/#", "things/#",
        ] + unreadable)
        let agentWriter = try broker.client("thing-agent", agentListener: true)
        try await agentWriter.connect()
        let marker = "thing-agent/events/dev1/status"
        for topic in ["thing-agent/events/dev1/properties", "thing-agent/replies/svc-dashboard/r1",
                      "thing-agent/agents/thing-agent/status"] {
            #expect(try await reaches(agentWriter, topic, reader, marker: marker), "\(topic)")
        }
        for topic in unreadable {
            #expect(try await !reaches(agentWriter, topic, reader, marker: marker), "\(topic) must not be read")
        }
        await reader.disconnect()
        await agentWriter.disconnect()
        await agent.disconnect()
    }

    @Test(.timeLimit(.minutes(1)))
    func theOperatorsCLIUserSendsRequestsAndFollowsDevicesButWritesNoReport() async throws {
        let broker = try await Self.broker()
        defer { broker.stop() }
        let agent = try await Self.agentObserver(broker)
        let cli = try broker.client("thing-agent-cli", agentListener: true)
        try await cli.connect()
        let own = "things/dev1/thing/properties/set"
        for suffix in ["properties/set", "info/get", "wifi/scan", "gateway/transfer/start", "status", "info",
                       "unbind"] {
            #expect(try await reaches(cli, "things/dev1/thing/\(suffix)", agent, marker: own), "\(suffix)")
        }
        for topic in ["things/dev1/thing/properties", "things/dev1/thing/signal",
                      "things/dev1/thing/gateway/transfer/status", "things/dev1/thing/properties/set_response",
                      "thing-agent/events/dev1/status", "thing-agent/agents/thing-agent/status"] {
            #expect(try await !reaches(cli, topic, agent, marker: own), "\(topic) must be denied")
        }
        // What watch, transfer, set, info --fetch and wifi-scan read: every device topic, and the agent's status.
        let filters = Topics().subscriptions.map(\.filter)
        let reader = try await BrokerProbe.connect(try broker.client("thing-agent-cli", agentListener: true),
                                                   subscribing: filters + ["thing-agent/agents/+/status",
                                                                           "thing-agent/replies/svc-dashboard/1"])
        let gateway = try broker.client("gw-example")
        try await gateway.connect()
        let marker = "things/gw-example/thing/status"
        for suffix in ["properties", "signal", "info", "gateway/transfer/status", "gateway/transfer/start_response",
                       "properties/set_response", "info/get_response", "wifi/scan_response"] {
            #expect(try await reaches(gateway, "things/gw-example/thing/\(suffix)", reader, marker: marker), "\(suffix)")
        }
        let agentWriter = try broker.client("thing-agent", agentListener: true)
        try await agentWriter.connect()
        #expect(try await reaches(agentWriter, "thing-agent/agents/thing-agent/status", reader,
                                  marker: "things/dev1/thing/info"))
        #expect(try await !reaches(agentWriter, "thing-agent/replies/svc-dashboard/1", reader,
                                   marker: "things/dev1/thing/info"))
        await reader.disconnect()
        await agentWriter.disconnect()
        await gateway.disconnect()
        await cli.disconnect()
        await agent.disconnect()
    }
}
