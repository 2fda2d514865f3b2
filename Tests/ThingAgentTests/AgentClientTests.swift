import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `AgentClient` against a real broker and a real daemon (a service agent on a temporary cache file): it reads
/// the file read-only and gets every request done by the daemon.
@Suite("AgentClient: a light client of the daemon", .serialized)
struct AgentClientTests {
    /// Every kind of event the daemon publishes reads back as the event a local listener got.
    @Test func everyFeedEventReadsBackAsTheEventPublished() throws {
        let now = t0 + 99
        let image = FirmwareCatalog.Image(version: "1.5.0", url: "https://fw.example/1.5.0.bin", sha256: "")
        let events: [DeviceEvent] = [
            .propertiesChanged(deviceId: "d", changes: [
                PropertyChange(code: "switch_1", value: true, time: t0, previous: false),
                PropertyChange(code: "mode", value: "white", time: t0 + 1, previous: nil)]),
            .statusChanged(deviceId: "d", online: false, time: t0),
            .signalUpdated(deviceId: "d", wifiSignal: SignalReading(dBm: -61, time: t0), rsrp: nil),
            .signalUpdated(deviceId: "d", wifiSignal: nil, rsrp: SignalReading(dBm: -95, time: t0 + 2)),
            .infoChanged(deviceId: "d", info: DeviceInfo(devId: "d", fields: ["name": "Lamp", "firmwareVersion": "1.4.2"])),
            .transferStatusChanged(deviceId: "gw2", info: TransferInfo(
                sourceDeviceId: "gw2", targetDeviceId: "gw1", status: .deviceDataInit, time: t0, updatedAt: now)),
            .offlineWarning(deviceId: "d", offlineSince: t0),
            .backOnline(deviceId: "d", offlineSince: t0, away: 40_000),
            .upgradeChanged(deviceId: "d", upgrade: OTAUpgrade(
                deviceId: "d", fromVersion: "1.4.2", image: image, stage: .downloading, progress: 40, failedCode: "",
                startedAt: t0, updatedAt: t0 + 5, reportTime: t0 + 5, endedAt: nil)),
            .linkPropagated(deviceId: "d", propagation: LinkPropagation(
                link: "hall", source: "d:switch_1", code: "switch_1", value: true, sent: ["e:switch_1"],
                offline: ["f:switch_1"])),
            .activated(deviceId: "d", pairing: "pair-1", gatewayId: nil),
            .eventReported(deviceId: "d", event: ThingEvent(name: "pressed", params: .object(["count": 2]), time: t0)),
            .commandRefused(deviceId: "d", refusal: CommandRefusal(
                source: "homeAssistant", command: #"{"number:report_period":1234}"#, outcome: "invalid",
                message: "report_period: 1234 is off the step 10 (from 10); nothing was sent", time: t0)),
        ]
        for event in events {
            let published = JSONValue.object(EventPublisher.payload(event, now: now))
            let read = DeviceEvent(feed: try JSONParser.parse(published.serializedBytes()))
            #expect(read == event, "\(published.serialized())")
        }
        #expect(Set(events.map(\.kind.rawValue)).count == EventPublisher.kindNames.count)
        #expect(DeviceEvent(feed: ["devId": "d", "event": "nosuch"]) == nil)
        #expect(DeviceEvent(feed: ["devId": "d", "event": "status"]) == nil)
    }

    /// A client beside the daemon follows one device's events: only that device, only the kinds asked for.
    @Test(.timeLimit(.minutes(1)))
    func aClientFollowsOneDevicesEventsFromTheDaemonsFeed() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { daemon in
                let client = try AgentClient(configuration: daemon.configuration)
                try await client.connect()
                let events = try await client.events(device: "lamp", kinds: [.properties, .status])
                let lamp = try SimulatedDevice("lamp", brokerURL: broker.url)
                try await lamp.connect()
                let other = try SimulatedDevice("other", brokerURL: broker.url)
                try await other.connect()
                try await other.properties(#"{"switch_1":true}"#, time: t0)
                try await lamp.signal(wifi: -50, time: t0)
                try await lamp.status(true, time: t0)
                try await lamp.properties(#"{"switch_1":true,"bright_value":500}"#, time: t0 + 1)
                var seen: [DeviceEvent] = []
                for await event in events {
                    seen.append(event)
                    if seen.count == 2 { break }
                }
                #expect(seen.first == .statusChanged(deviceId: "lamp", online: true, time: t0))
                guard case .propertiesChanged(let id, let changes)? = seen.last else {
                    Issue.record("expected the properties, got \(seen)")
                    return
                }
                #expect(id == "lamp")
                #expect(Dictionary(uniqueKeysWithValues: changes.map { ($0.code, $0.value) })
                        == ["switch_1": true, "bright_value": 500])
                await #expect(throws: AgentClientError.self) { _ = try await client.events(device: "a/+") }
                await client.disconnect()
                await lamp.disconnect()
                await other.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func requestsGoThroughTheDaemonAndReadsComeFromTheFile() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { daemon in
                let lamp = try SimulatedDevice("lamp", brokerURL: broker.url)
                try await lamp.connect()
                try await lamp.info(#"{"name":"Lamp","abilities":["wifiList"]}"#, time: t0)
                try await lamp.status(true, time: t0)
                let setting = try await lamp.answer("properties/set") { _ in #""code":0,"message":"done""# }
                let plug = try SimulatedDevice("plug", brokerURL: broker.url)
                try await plug.connect()
                try await plug.info(#"{"abilities":["wifiList"]}"#, time: t0)
                let scanning = try await plug.answer("wifi/scan") { _ in
                    #""code":0,"data":[{"ssid":"Cafe","rssi":-75},{"ssid":"Home","rssi":-48}]"#
                }
                let bulb = try SimulatedDevice("bulb", brokerURL: broker.url)
                try await bulb.connect()
                try await bulb.info(#"{"firmwareVersion":"1.0.0"}"#, time: t0)
                let fetching = try await bulb.answer("info/get") { _ in #""code":0,"data":{"firmwareVersion":"2.0.0"}"# }
                let sleepy = try SimulatedDevice("sleepy", brokerURL: broker.url)
                try await sleepy.connect()
                try await sleepy.status(false, time: t0)
                try await waitUntil {
                    daemon.cache.device("sleepy")?.online == false && daemon.cache.device("lamp") != nil
                        && daemon.cache.device("plug") != nil && daemon.cache.device("bulb") != nil
                }
                try await waitUntil { (try? CacheReader(path: daemon.configuration.cache.database).device("sleepy")) != nil }

                let client = try AgentClient(configuration: daemon.configuration)
                try await client.connect()
                #expect(try client.device("lamp")?.info.name == "Lamp")
                #expect(try client.devices().map(\.id) == ["bulb", "lamp", "plug", "sleepy"])

                let applied = try await client.sendPropertySet(deviceId: "lamp", ["switch_1": true])
                #expect(applied.succeeded)
                #expect(applied.message == "done")
                #expect(applied.msgId?.isEmpty == false)
                // Checked here: nothing reaches the daemon for an offline device.
                let offline = try await client.sendPropertySet(deviceId: "sleepy", ["switch_1": true])
                #expect(offline.error == .deviceOffline(deviceId: "sleepy"))
                #expect(offline.msgId == nil)
                // The daemon's timeout comes back as the very error a local agent gives.
                let timedOut = try await client.sendPropertySet(deviceId: "sleepy", ["switch_1": true],
                                                                timeout: .milliseconds(300), force: true)
                #expect(timedOut.error == .timeout(deviceId: "sleepy", request: "properties/set", seconds: 0.3))

                // Device requests the daemon answers from its devices.
                let scan = try await client.scanWifiList("plug")
                #expect(scan.map(\.ssid) == ["Home", "Cafe"])
                let fetched = try await client.fetchInfo("bulb")
                #expect(fetched["firmwareVersion"] == "2.0.0")
                #expect(try client.device("bulb")?.info["firmwareVersion"] == "2.0.0", "in the file before the answer")
                // A client with no cache file to read (another host, a container): the answer carries the info.
                var remote = daemon.configuration
                remote.cache.database = NSTemporaryDirectory() + "no-such-dir-\(UUID().uuidString)/cache.sqlite"
                let away = try AgentClient(configuration: remote)
                try await away.connect()
                let fetchedAway = try await away.fetchInfo("bulb")
                #expect(fetchedAway["firmwareVersion"] == "2.0.0" && fetchedAway.devId == "bulb")
                await away.disconnect()
                await #expect(throws: RequestError.unsupported(
                    deviceId: "nosuch", reason: "not in the cache, so its abilities are unknown")) {
                    _ = try await client.scanWifiList("nosuch")
                }

                // A change through the daemon shows in its memory at once.
                _ = try await client.apply(.edit(device: "lamp", DeviceEdit(room: "Hall")))
                #expect(try await client.info("lamp")["room"] == "Hall")

                // The daemon's refusals and silence are the client's errors.
                await #expect {
                    _ = try await client.call("nosuch")
                } throws: { error in
                    guard case AgentClientError.refused(404, _, nil) = error else { return false }
                    return true
                }
                let elsewhere = try AgentClient(configuration: daemon.configuration, daemon: "no-daemon-here")
                try await elsewhere.connect()
                await #expect {
                    _ = try await elsewhere.call("info", JSONObject([("device", "lamp")]), timeout: .milliseconds(300))
                } throws: { error in
                    guard case AgentClientError.noAnswer("info", _) = error else { return false }
                    return true
                }
                await elsewhere.disconnect()
                await client.disconnect()
                for task in [setting, scanning, fetching] { task.cancel() }
                for device in [lamp, plug, bulb, sleepy] { await device.disconnect() }
            }
        }
    }
}
