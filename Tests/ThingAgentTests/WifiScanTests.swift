import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

@Suite("Wi-Fi scan", .serialized)
struct WifiScanTests {
    @Test func securityCodesHaveNames() {
        #expect(WifiNetwork(ssid: "a", rssi: -50, security: 0).securityName == "open")
        #expect(WifiNetwork(ssid: "a", rssi: -50, security: 3).securityName == "WPA2-PSK")
        #expect(WifiNetwork(ssid: "a", rssi: -50, security: 7).securityName == "WPA2/WPA3-PSK")
        #expect(WifiNetwork(ssid: "a", rssi: -50, security: 42).securityName == "code 42")
        #expect(WifiNetwork(ssid: "a", rssi: -50).securityName == nil)
    }

    @Test func qualityBands() {
        #expect(SignalQuality(dBm: -30) == .excellent)
        #expect(SignalQuality(dBm: -50) == .excellent)
        #expect(SignalQuality(dBm: -51) == .good)
        #expect(SignalQuality(dBm: -60) == .good)
        #expect(SignalQuality(dBm: -61) == .fair)
        #expect(SignalQuality(dBm: -70) == .fair)
        #expect(SignalQuality(dBm: -71) == .weak)
        #expect(SignalQuality.weak < .fair && SignalQuality.good < .excellent)
    }

    @Test func scanResultKeepsTheStrongestPerSSIDAndSkipsUnusableEntries() throws {
        let data = try JSONParser.parse("""
            [{"ssid":"Home","rssi":-70,"sec":5},{"ssid":"Cafe","rssi":-52},{"ssid":"Home","rssi":-48,"sec":4},
             {"ssid":"","rssi":-30},{"ssid":"NoLevel"},{"rssi":-40},{"ssid":"Attic","rssi":-52,"sec":0}]
            """)
        let networks = try WifiNetwork.scanResult(data)
        #expect(networks == [WifiNetwork(ssid: "Home", rssi: -48, security: 4),
                             WifiNetwork(ssid: "Attic", rssi: -52, security: 0),
                             WifiNetwork(ssid: "Cafe", rssi: -52)])
        #expect(networks.map(\.quality) == [.excellent, .good, .good])
        #expect(throws: PayloadError.self) { try WifiNetwork.scanResult(.object(JSONObject())) }
        #expect(throws: PayloadError.self) { try WifiNetwork.scanResult(nil) }
    }

    @Test(.timeLimit(.minutes(1)))
    func scanAnswersOnePerSSIDStrongestFirst() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let plug = try SimulatedDevice("plug", brokerURL: broker.url)
                try await plug.connect()
                try await plug.info(#"{"name":"Plug","abilities":["wifiList"]}"#, time: t0)
                try await plug.status(true, time: t0)
                let answering = try await plug.answer("wifi/scan") { request in
                    guard request.contains(#""data":{}"#) else { return #""code":1003"# }
                    return #""code":0,"data":[{"ssid":"OS_BASE_2G","rssi":-45,"sec":5},{"ssid":"We","rssi":-52,"sec":5},"#
                        + #"{"ssid":"OS_BASE_2G","rssi":-71,"sec":5},{"ssid":"Guest","rssi":-75,"sec":0},{"ssid":"We","rssi":-66}]"#
                }
                try await waitUntil { agent.cache.device("plug")?.online == true }
                let networks = try await DeviceInfoManager(deviceId: "plug", agent: agent).scanWifiList()
                #expect(networks.map(\.ssid) == ["OS_BASE_2G", "We", "Guest"])
                #expect(networks.map(\.rssi) == [-45, -52, -75])
                #expect(networks.map(\.quality) == [.excellent, .good, .weak])
                answering.cancel()
                await plug.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func deviceWithoutTheAbilityOrUnknownFailsAtOnce() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let lamp = try SimulatedDevice("lamp", brokerURL: broker.url)
                try await lamp.connect()
                try await lamp.info(#"{"name":"Lamp","abilities":["gatewayTransfer"]}"#, time: t0)
                try await waitUntil { agent.cache.device("lamp")?.info.name == "Lamp" }
                var asked = 0
                let stream = lamp.client.messages
                try await lamp.client.subscribe("things/+/thing/wifi/scan", qos: .atLeastOnce)
                await #expect {
                    try await agent.scanWifiList("lamp")
                } throws: { error in
                    guard case RequestError.unsupported("lamp", let reason) = error else { return false }
                    return reason.contains("wifiList")
                }
                await #expect {
                    try await agent.scanWifiList("nosuch")
                } throws: { error in
                    guard case RequestError.unsupported("nosuch", let reason) = error else { return false }
                    return reason.contains("not in the cache")
                }
                // Nothing was published: the next message the device sees is our own marker.
                try await lamp.client.publish("things/marker/thing/wifi/scan", payload: Array("{}".utf8))
                for await message in stream {
                    if message.topic == "things/marker/thing/wifi/scan" { break }
                    asked += 1
                }
                #expect(asked == 0)
                await lamp.disconnect()
            }
        }
    }
}
