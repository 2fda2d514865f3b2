import Foundation
import JSON
import MQTT
import Testing
import TestSupport

/// The TuyaLink device the dialect's tests run (Tuya's own C SDK, `TuyaLinkDevice`) against a real mosquitto with
/// TLS and no agent: that it connects as the SDK does, that what it sends has the SDK's shape, and that it answers
/// sets and actions as firmware does. What the TuyaLink tests of the agent take for granted.
@Suite("TuyaLink: the SDK device harness")
struct TuyaLinkDeviceHarnessTests {
    static var tlsBroker: MosquittoBroker.Options {
        var options = MosquittoBroker.Options()
        options.tls = true
        options.requireClientCertificate = false  // the SDK has no client certificate
        return options
    }

    /// The first message on `topic` that `condition` holds for, its payload parsed.
    static func payload(_ recorder: TopicRecorder, on topic: String, _ what: String,
                        where condition: @escaping @Sendable (JSONObject) -> Bool = { _ in true }) async throws
        -> JSONObject {
        let match = { @Sendable () -> JSONObject? in
            recorder.messages.lazy.filter { $0.topic == topic }
                .compactMap { (try? JSONParser.parse($0.payload))?.objectValue }.first(where: condition)
        }
        do {
            try await waitUntil(timeout: .seconds(30)) { match() != nil }
        } catch {
            let seen = recorder.messages.map { "\($0.topic) \($0.text)" }.joined(separator: "\n")
            throw TestSupportError("no \(what) on \(topic) within 30 s; the broker carried:\n\(seen)")
        }
        return match()!
    }

    @Test(.timeLimit(.minutes(3)))
    func theSDKDeviceConnectsReportsAndAnswersSetsAndActions() async throws {
        try await withBroker(Self.tlsBroker) { broker in
            let scratch = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: scratch) }
            let recorder = try await TopicRecorder.start(broker.url, filter: "tylink/#")
            let device = try await TuyaLinkDevice(broker, deviceID: "tdev1", logPath: scratch + "/tdev1.out")
            try await device.waitUntilConnected()
            let own = "tylink/tdev1/"

            // It connected as the SDK does: MQTT 3.1.1, its client id and signed user name, over the TLS listener.
            let connection = try #require(
                broker.log().split(separator: "\n").first { $0.contains("as tuyalink_tdev1") }, "\(broker.log())")
            #expect(connection.contains("(p2, c1, k60, u'tdev1|signMethod=hmacSha256,timestamp="), "\(connection)")
            #expect(connection.contains(",secureMode=1,accessType=1')"), "\(connection)")

            // A report, in the SDK's shape: its msgId counter from "0", the time in seconds, the data as given.
            let before = Int64(Date().timeIntervalSince1970)
            try device.send(#"{"cmd":"report","data":{"switch_led":{"value":true,"time":1700000000000}}}"#)
            let report = try await Self.payload(recorder, on: own + "thing/property/report", "report")
            let after = Int64(Date().timeIntervalSince1970)
            #expect(report.keys == ["msgId", "time", "data"], "\(report)")
            #expect(report["msgId"] == "0")
            let time = try #require(report["time"]?.int64Value, "\(report)")
            #expect(time >= before - 1 && time <= after + 1, "seconds, not milliseconds: \(time)")
            #expect(report["data"] == ["switch_led": ["value": true, "time": 1700000000000]])
            try await device.waitFor("the report's result") {
                $0["event"] == "result" && $0["cmd"] == "report" && $0["rc"] == 0
            }

            // A property set reaches the device (as the SDK parsed it), is answered with its msgId, then reported.
            let now = Int64(Date().timeIntervalSince1970)
            try await recorder.client.publish(
                own + "thing/property/set", #"{"msgId":"agent-1","time":\#(now),"data":{"bright_value":500}}"#)
            let set = try await device.waitFor("the set") { $0["event"] == "message" && $0["msgId"] == "agent-1" }
            #expect(set["type"] == "THING_TYPE_PROPERTY_SET" && set["topic"] == "tylink/tdev1/thing/property/set")
            #expect(set["deviceId"] == "tdev1" && set["time"] == .integer(now) && set["code"] == 0, "\(set)")
            #expect(set["data"] == ["bright_value": 500] && set["sdkParsed"] == true, "\(set)")
            let setResponse = try await Self.payload(recorder, on: own + "thing/property/set_response", "set_response")
            #expect(setResponse.keys == ["msgId", "time"], "the SDK's answer has no code and no data: \(setResponse)")
            #expect(setResponse["msgId"] == "agent-1")
            let applied = try await Self.payload(recorder, on: own + "thing/property/report", "the applied value") {
                $0["data"]?["bright_value"]?["value"] == 500
            }
            #expect(applied["msgId"] == "1", "the SDK's next msgId: \(applied)")
            #expect((applied["data"]?["bright_value"]?["time"]?.int64Value ?? 0) > now * 1000 - 1000,
                    "the property's time in milliseconds: \(applied)")
            let order = recorder.messages.map(\.topic).filter { $0.hasPrefix(own + "thing/property/") }
            #expect(order.firstIndex(of: own + "thing/property/set_response")!
                        < order.lastIndex(of: own + "thing/property/report")!, "answered, then reported: \(order)")

            // An action is answered with its msgId and the output: the default one, then one the test configured.
            try await recorder.client.publish(
                own + "thing/action/execute",
                #"{"msgId":"agent-2","time":\#(now),"data":{"actionCode":"reboot","inputParams":{"delay":1}}}"#)
            let executed = try await Self.payload(recorder, on: own + "thing/action/execute_response", "its answer")
            #expect(executed.keys == ["msgId", "time", "data"], "\(executed)")
            #expect(executed["msgId"] == "agent-2")
            #expect(executed["data"] == ["actionCode": "reboot", "outputParams": ["result": "ok"]], "\(executed)")
            try device.send(#"{"cmd":"action_output","actionCode":"scan","outputParams":{"networks":["a","b"]}}"#)
            try await device.waitFor("the output configured") {
                $0["event"] == "result" && $0["cmd"] == "action_output"
            }
            try await recorder.client.publish(
                own + "thing/action/execute", #"{"msgId":"agent-3","time":\#(now),"data":{"actionCode":"scan"}}"#)
            let scanned = try await Self.payload(recorder, on: own + "thing/action/execute_response", "scan's answer") {
                $0["msgId"] == "agent-3"
            }
            #expect(scanned["data"] == ["actionCode": "scan", "outputParams": ["networks": ["a", "b"]]], "\(scanned)")

            // A sub-device's set reaches it through its gateway's connection, answered and reported on its topics.
            try device.send(#"{"cmd":"subscribe_sub","deviceId":"tsub1"}"#)
            try await device.waitFor("the sub-device's topics") {
                $0["event"] == "subscribed" && $0["deviceId"] == "tsub1"
            }
            try await recorder.client.publish(
                "tylink/tsub1/thing/property/set", #"{"msgId":"agent-4","time":\#(now),"data":{"switch":true}}"#)
            let subResponse = try await Self.payload(
                recorder, on: "tylink/tsub1/thing/property/set_response", "the sub-device's set_response")
            #expect(subResponse["msgId"] == "agent-4")
            _ = try await Self.payload(recorder, on: "tylink/tsub1/thing/property/report", "the sub-device's report") {
                $0["data"]?["switch"]?["value"] == true
            }

            // An OTA notice: a topic the SDK cannot parse (it hands over an empty message); read from the payload.
            try await recorder.client.publish(
                own + "ota/issue", #"{"msgId":"agent-5","time":\#(now),"data":{"version":"1.2.0"}}"#)
            let ota = try await device.waitFor("the OTA notice") { $0["event"] == "message" && $0["msgId"] == "agent-5" }
            #expect(ota["sdkParsed"] == false && ota["type"] == "THING_TYPE_UNKNOWN" && ota["deviceId"] == "tdev1")
            #expect(ota["data"] == ["version": "1.2.0"], "\(ota)")

            // SIGTERM: it disconnects and exits 0.
            let status = await device.stop()
            #expect(status == 0, "\(device.process.log)")
            let last = device.events.suffix(2).map { $0["event"] }
            #expect(last == ["disconnected", "quit"], "\(device.process.log)")
            await recorder.stop()
        }
    }
}
