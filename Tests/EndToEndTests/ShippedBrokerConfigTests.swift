import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent

/// deploy/mosquitto.conf and deploy/mosquitto.acl in the real mosquitto: every rule allows what its comment says
/// and denies the rest. Writes are witnessed by the agent's user, which reads everything it may; reads by a
/// second connection of the user under test, fed by the agent's user.
@Suite("the shipped broker configuration", .serialized)
struct ShippedBrokerConfigTests {
    static let fleet = ["dev1", "dev2", "gw-example", "sub-example-1", "svc-dashboard", "svc-other", "lamp1&a1PK"]
    static let agentSide = ["thing-agent", "thing-agent-cli"]

    /// A fresh broker, the agent's witness and a connected writer for `user`, for `body`; stops them all after.
    static func withWriter(_ user: String, agentListener: Bool = false,
                           _ body: (ShippedBroker, MQTTClient, BrokerProbe) async throws -> Void) async throws {
        let broker = try await ShippedBroker(fleetUsers: fleet, agentUsers: agentSide)
        defer { broker.stop() }
        let witness = try await BrokerProbe.connect(try broker.client("thing-agent", agentListener: true),
                                                    subscribing: ["things/+/thing/#", "thing-agent/#"])
        let writer = try broker.client(user, agentListener: agentListener)
        try await writer.connect()
        try await body(broker, writer, witness)
        await writer.disconnect()
        await witness.disconnect()
    }

    /// `user` reading `allowed` and not `denied` (subscribed to each, plus `extraFilters`), fed by the agent's user.
    static func expectReads(_ broker: ShippedBroker, _ user: String, agentListener: Bool = false,
                            extraFilters: [String] = [], allowed: [String], denied: [String], marker: String,
                            sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let reader = try await BrokerProbe.connect(try broker.client(user, agentListener: agentListener),
                                                   subscribing: extraFilters + allowed + denied + [marker])
        let feeder = try broker.client("thing-agent", agentListener: true)
        try await feeder.connect()
        try await expectAccess(feeder, allowed: allowed, denied: denied, reaching: reader, marker: marker,
                               sourceLocation: sourceLocation)
        await feeder.disconnect()
        await reader.disconnect()
    }

    @Test(.timeLimit(.minutes(2)))
    func aDeviceWritesOnlyItsOwnTopicsAndReadsOnlyItsOwnRequests() async throws {
        try await Self.withWriter("dev1") { broker, device, witness in
            let own = ["properties", "status", "signal", "info", "gateway/transfer/status", "properties/set_response",
                       "info/get_response", "wifi/scan_response", "gateway/transfer/start_response",
                       "ota/start_response", "ota/progress"]
            try await expectAccess(device, allowed: own.map { "things/dev1/thing/\($0)" }, denied: [
                "things/dev2/thing/properties", "things/dev2/thing/status", "things/dev2/thing/info",
                "things/dev1/thing/properties/set", "things/dev1/thing/unbind", "things/dev2/thing/unbind",
                "things/dev2/thing/ota/progress", "things/dev2/thing/ota/start_response", "things/dev1/thing/ota/start",
                "thing-agent/events/dev1/properties", "thing-agent/api/thing-agent/request/set",
                "thing-agent/agents/thing-agent/status", "thing-agent/replies/svc-dashboard/1",
            ], reaching: witness, marker: "things/dev1/thing/status")
            // One connection per user on the fleet listener (its client id is the user name): the writer goes.
            await device.disconnect()
            try await Self.expectReads(broker, "dev1", allowed: [
                "properties/set", "info/get", "wifi/scan", "gateway/transfer/start", "unbind", "ota/start",
            ].map { "things/dev1/thing/\($0)" }, denied: [
                "things/dev2/thing/properties/set", "things/dev1/thing/status", "thing-agent/events/x/status",
                "things/dev2/thing/ota/start",
                "thing-agent/replies/svc-dashboard/1",
            ], marker: "things/dev1/thing/info/get")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aGatewayAlsoWritesTheTopicsOfTheSubDevicesItsBlockNames() async throws {
        try await Self.withWriter("gw-example") { broker, gateway, witness in
            let sub = ["properties", "status", "signal", "info", "properties/set_response", "info/get_response",
                       "wifi/scan_response", "ota/start_response", "ota/progress"]
            try await expectAccess(gateway, allowed: sub.map { "things/sub-example-1/thing/\($0)" }
                                   + ["things/gw-example/thing/gateway/transfer/status"], denied: [
                "things/dev1/thing/info", "things/dev1/thing/properties", "things/sub-example-1/thing/unbind",
                "things/sub-example-1/thing/properties/set", "things/sub-example-1/thing/ota/start",
                "things/dev1/thing/ota/progress", "things/dev1/thing/ota/start_response",
            ], reaching: witness, marker: "things/gw-example/thing/status")
            await gateway.disconnect()
            try await Self.expectReads(broker, "gw-example", allowed: [
                "things/sub-example-1/thing/info/get", "things/gw-example/thing/wifi/scan",
                "things/sub-example-1/thing/ota/start", "things/gw-example/thing/ota/start",
            ], denied: ["things/dev1/thing/properties/set", "things/dev1/thing/ota/start"], marker: "things/sub-example-1/thing/properties/set")
        }
    }

    /// The API's methods that change nothing: all the example service may call.
    static let readMethods = ["info", "devices", "gateways", "pairings", "health", "firmware", "sceneList",
                              "linkList"]

    @Test(.timeLimit(.minutes(1)))
    func aServiceReachesTheAPIsReadsAndTheEventsAndNothingElse() async throws {
        try await Self.withWriter("svc-dashboard") { broker, service, witness in
            let api = "thing-agent/api/thing-agent/request/"
            try await expectAccess(service, allowed: Self.readMethods.map { api + $0 },
                                   denied: Agent.apiMethods.filter { !Self.readMethods.contains($0) }.map { api + $0 } + [
                "things/dev1/thing/properties/set", "things/dev1/thing/properties", "things/dev1/thing/unbind",
                "thing-agent/events/dev1/properties", "thing-agent/replies/svc-dashboard/1",
                "thing-agent/agents/thing-agent/status", "thing-agent/api/other-agent/request/info",
                "things/dev1/thing/ota/start", "things/dev1/thing/ota/progress",
            ], reaching: witness, marker: "thing-agent/api/thing-agent/request/info")
            await service.disconnect()
            // As a service subscribes (the feed, its answers, the announcement), and broader filters too.
            try await Self.expectReads(broker, "svc-dashboard", extraFilters: [
                "thing-agent/events/#", "thing-agent/replies/svc-dashboard/#", "thing-agent/agents/+/status",
                "thing-agent/#", "things/#",
            ], allowed: [
                "thing-agent/events/dev1/properties", "thing-agent/replies/svc-dashboard/r1",
                "thing-agent/agents/thing-agent/status",
            ], denied: [
                "thing-agent/replies/svc-other/r1", "things/dev1/thing/properties/set",
                "thing-agent/api/thing-agent/request/info", "things/dev1/thing/status",
                "things/dev1/thing/ota/start",
            ], marker: "thing-agent/events/dev1/status")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theOperatorsCLIUserSendsRequestsAndFollowsDevicesButWritesNoReport() async throws {
        try await Self.withWriter("thing-agent-cli", agentListener: true) { broker, cli, witness in
            let requests = ["properties/set", "info/get", "wifi/scan", "gateway/transfer/start", "status", "info",
                            "unbind"]
            // And, to the daemon's API, every method (the CLI's writes go through it).
            try await expectAccess(cli, allowed: requests.map { "things/dev1/thing/\($0)" }
                                   + Agent.apiMethods.map { "thing-agent/api/thing-agent/request/\($0)" }, denied: [
                "things/dev1/thing/properties", "things/dev1/thing/signal",
                "things/dev1/thing/gateway/transfer/status", "things/dev1/thing/properties/set_response",
                "thing-agent/events/dev1/status", "thing-agent/agents/thing-agent/status",
                "things/dev1/thing/ota/progress", "things/dev1/thing/ota/start_response",
                // ota asks the daemon, which alone sends the upgrade request.
                "things/dev1/thing/ota/start",
            ], reaching: witness, marker: "things/dev1/thing/properties/set")

            // What watch, transfer, set, info --fetch, wifi-scan and ota read: every device topic (the filters the
            // CLI subscribes to, and ota's one device's progress), fed by a gateway; and the agent's announcement,
            // fed by the agent.
            let reader = try await BrokerProbe.connect(
                try broker.client("thing-agent-cli", agentListener: true),
                subscribing: Topics().subscriptions.map(\.filter) + [Topics().otaProgress("gw-example"),
                                                                     "thing-agent/agents/+/status",
                                                                     "thing-agent/replies/svc-dashboard/1"])
            let gateway = try broker.client("gw-example")
            try await gateway.connect()
            let reports = ["properties", "signal", "info", "gateway/transfer/status", "gateway/transfer/start_response",
                           "properties/set_response", "info/get_response", "wifi/scan_response",
                           "ota/start_response", "ota/progress"]
            try await expectAccess(gateway, allowed: reports.map { "things/gw-example/thing/\($0)" }, denied: [],
                                   reaching: reader, marker: "things/gw-example/thing/status")
            await gateway.disconnect()
            await reader.disconnect()
            try await Self.expectReads(broker, "thing-agent-cli", agentListener: true,
                                       allowed: ["thing-agent/agents/thing-agent/status",
                                                 "thing-agent/replies/thing-agent-cli/1",
                                                 "thing-agent/events/gw-example/transfer"],
                                       denied: ["thing-agent/replies/svc-dashboard/1"], marker: "things/dev1/thing/info")
        }
    }

    /// The CLI's Alink lines: it sends property sets and service calls (standing in for the daemon), never a
    /// device's post or the answers the daemon owes the devices.
    @Test(.timeLimit(.minutes(1)))
    func theOperatorsCLIUserSendsAlinkSetsAndServiceCallsButNoAnswer() async throws {
        try await Self.withWriter("thing-agent-cli", agentListener: true) { broker, cli, _ in
            let witness = try await BrokerProbe.connect(try broker.client("thing-agent", clientID: "alink-witness",
                                                                         agentListener: true),
                                                        subscribing: ["/sys/#", "/ext/#"])
            try await expectAccess(cli, allowed: [
                "/sys/a1PK/lamp1/thing/service/property/set", "/sys/a1PK/lamp1/thing/service/identify",
            ], denied: [
                "/sys/a1PK/lamp1/thing/event/property/post", "/sys/a1PK/lamp1/thing/event/property/post_reply",
                "/sys/a1GW/gw1/thing/topo/add_reply", "/ext/session/a1GW/gw1/combine/batch_login_reply",
            ], reaching: witness, marker: "/sys/a1PK/lamp1/thing/service/property/set")
            await witness.disconnect()
        }
    }

    /// The example Alink device block: Linkkit's user `lamp1&a1PK` writes its own posts, set answers, tag changes,
    /// firmware version and NTP requests, reads its own sets and replies, and nothing of another device.
    @Test(.timeLimit(.minutes(1)))
    func anAlinkDeviceWritesAndReadsOnlyItsOwnSysTopics() async throws {
        let witnessed = ["/sys/#", "/ota/#", "/ext/#"]
        let broker = try await ShippedBroker(fleetUsers: Self.fleet, agentUsers: Self.agentSide)
        defer { broker.stop() }
        let witness = try await BrokerProbe.connect(try broker.client("thing-agent", agentListener: true),
                                                    subscribing: witnessed)
        let device = try broker.client("lamp1&a1PK")
        try await device.connect()
        let own = "/sys/a1PK/lamp1/thing/"
        try await expectAccess(device, allowed: [
            own + "event/property/post", own + "event/alarm/post", own + "service/property/set_reply",
            own + "service/identify_reply", own + "deviceinfo/update", own + "deviceinfo/delete", "/ota/device/inform/a1PK/lamp1",
            "/ota/device/progress/a1PK/lamp1", "/ext/ntp/a1PK/lamp1/request",
        ], denied: [
            "/sys/a1PK/lamp2/thing/event/property/post", own + "service/property/set", own + "event/property/post_reply",
            "/ota/device/inform/a1PK/lamp2", own + "topo/add", "/ext/session/a1PK/lamp1/combine/batch_login",
            "things/dev1/thing/properties",
        ], reaching: witness, marker: own + "event/property/post")
        await device.disconnect()
        try await Self.expectReads(broker, "lamp1&a1PK", allowed: [
            own + "service/property/set", own + "event/property/post_reply", own + "deviceinfo/update_reply",
            own + "service/identify", "/ext/ntp/a1PK/lamp1/response", "/ota/device/upgrade/a1PK/lamp1",
        ], denied: ["/sys/a1PK/lamp2/thing/service/property/set", "/sys/a1PK/lamp2/thing/service/identify",
                    "/ext/ntp/a1PK/lamp2/response",
                    "/ota/device/upgrade/a1PK/lamp2"],
                                   marker: own + "service/property/set")
        await witness.disconnect()
    }

    /// The agent's Alink lines: it sends sets and every answer the dialect owes, and no device's post (its NTP
    /// response and upgrade push, which it cannot read itself, are witnessed by the device in the test above).
    @Test(.timeLimit(.minutes(1)))
    func theAgentAnswersAlinkDevicesButWritesNoPost() async throws {
        try await Self.withWriter("thing-agent", agentListener: true) { broker, agent, _ in
            let witness = try await BrokerProbe.connect(try broker.client("thing-agent", clientID: "alink-witness",
                                                                         agentListener: true),
                                                        subscribing: ["/sys/#", "/ext/#", "/ota/#"])
            try await expectAccess(agent, allowed: [
                "/sys/a1PK/lamp1/thing/service/property/set", "/sys/a1PK/lamp1/thing/service/identify",
                "/sys/a1PK/lamp1/thing/event/property/post_reply",
                "/sys/a1PK/lamp1/thing/deviceinfo/update_reply", "/sys/a1GW/gw1/thing/topo/add_reply",
                "/ext/session/a1GW/gw1/combine/batch_login_reply",
            ], denied: [
                "/sys/a1PK/lamp1/thing/event/property/post", "/sys/a1PK/lamp1/thing/service/property/set_reply",
                "/ext/ntp/a1PK/lamp1/request", "/ota/device/progress/a1PK/lamp1",
            ], reaching: witness, marker: "/sys/a1PK/lamp1/thing/service/property/set")
            await witness.disconnect()
            // The broker's client events reach the agent's user (log_dest topic): a device's connect names it.
            let events = try await BrokerProbe.connect(try broker.client("thing-agent", clientID: "log-reader",
                                                                         agentListener: true),
                                                       subscribing: [BrokerLog.topic])
            let device = try broker.client("lamp1&a1PK")
            try await device.connect()
            try await waitUntil(timeout: .seconds(10)) { events.payloadsContaining("u'lamp1&a1PK'") > 0 }
            await device.disconnect()
            await events.disconnect()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theAgentSendsRequestsIncludingFirmwareUpgradesButWritesNoDeviceReport() async throws {
        try await Self.withWriter("thing-agent", agentListener: true) { _, agent, witness in
            let requests = ["properties/set", "info/get", "wifi/scan", "gateway/transfer/start", "ota/start",
                            "status", "info", "unbind"]
            try await expectAccess(agent, allowed: requests.map { "things/dev1/thing/\($0)" }
                                   + ["thing-agent/agents/thing-agent/status"], denied: [
                "things/dev1/thing/properties", "things/dev1/thing/signal", "things/dev1/thing/ota/progress",
                "things/dev1/thing/ota/start_response", "things/dev1/thing/properties/set_response",
            ], reaching: witness, marker: "things/dev1/thing/info/get")
        }
    }
}
