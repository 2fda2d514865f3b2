import JSON
import Testing
@testable import ThingAgent
@testable import ThingAgentCore

@Suite("Topics and device ids")
struct TopicTests {
    let topics = Topics(root: "things")

    @Test func parsesEveryInboundTopic() throws {
        #expect(try topics.parse("things/bf12ab/thing/properties") == ("bf12ab", .properties))
        #expect(try topics.parse("things/a.b_c:d-e/thing/status").kind == .status)
        #expect(try topics.parse("things/x/thing/signal").kind == .signal)
        #expect(try topics.parse("things/x/thing/info").kind == .info)
        #expect(try topics.parse("things/gw/thing/gateway/transfer/status").kind == .transferStatus)
        #expect(try topics.parse("things/x/thing/properties/set_response").kind == .response(.setProperties))
        #expect(try topics.parse("things/x/thing/info/get_response").kind == .response(.getInfo))
        #expect(try topics.parse("things/x/thing/wifi/scan_response").kind == .response(.wifiScan))
        #expect(try topics.parse("things/x/thing/gateway/transfer/start_response").kind
            == .response(.gatewayTransferStart))
    }

    @Test func rejectsForeignTopics() {
        for topic in ["other/x/thing/info", "things/x/thing/unknown", "things/x/info", "thingsx/x/thing/info",
                      "things", "things/x", "things/x/thing/properties/set", "things/x/thing/bogus_response"] {
            #expect(throws: Topics.ParseError.notAThingTopic, "\(topic)") { try topics.parse(topic) }
        }
    }

    @Test func rejectsInvalidDeviceIDs() {
        let long = String(repeating: "a", count: 65)
        for id in ["", "a b", "dev#", "dev+", "dé", "a\u{0}b", "tab\t", long] {
            #expect(throws: Topics.ParseError.invalidDeviceID, "\(id)") {
                try topics.parse("things/\(id)/thing/info")
            }
        }
        #expect(DeviceID.isValid(String(repeating: "a", count: 64)))
    }

    @Test func buildsRequestTopics() {
        #expect(topics.request(.setProperties, device: "d1") == "things/d1/thing/properties/set")
        #expect(topics.response(.wifiScan, device: "d1") == "things/d1/thing/wifi/scan_response")
        #expect(Topics(root: "site/a").request(.gatewayTransferStart, device: "gw")
            == "site/a/gw/thing/gateway/transfer/start")
    }

    @Test func multiLevelRootParses() throws {
        #expect(try Topics(root: "site/a").parse("site/a/d1/thing/info") == ("d1", .info))
    }
}

@Suite("Payload decoding")
struct PayloadDecoderTests {
    let decoder = PayloadDecoder()

    func decode(_ kind: InboundKind, _ text: String, arrival: Millis = 5_000_000_000_000) throws -> InboundMessage {
        try Array(text.utf8).withUnsafeBytes { try decoder.decode(kind, payload: $0, arrival: arrival) }
    }

    @Test func propertyReportBareAndWrappedValues() throws {
        let message = try decode(.properties, """
            {"msgId":"45lkj3551234","time":1764450000000,
             "data":{"switch_1":{"value":true,"time":1764450000001},"bright_value":{"value":800,"time":1764450000000},"mode":"white"}}
            """)
        #expect(message == .properties([
            ("switch_1", PropertyValue(value: true, time: 1_764_450_000_001)),
            ("bright_value", PropertyValue(value: 800, time: 1_764_450_000_000)),
            ("mode", PropertyValue(value: "white", time: 1_764_450_000_000)),
        ]))
    }

    @Test func tenDigitSecondsBecomeMilliseconds() throws {
        #expect(try decode(.status, #"{"time":1764450000,"status":"online"}"#)
            == .status(online: true, time: 1_764_450_000_000))
    }

    @Test func bothStatusForms() throws {
        #expect(try decode(.status, #"{"time":1764450000000,"status":"offline"}"#)
            == .status(online: false, time: 1_764_450_000_000))
        #expect(try decode(.status, #"{"time":1764450000000,"status":{"value":1,"time":1764450000500}}"#)
            == .status(online: true, time: 1_764_450_000_500))
        #expect(try decode(.status, #"{"status":{"value":3}}"#, arrival: 42_000_000_000_000)
            == .status(online: false, time: 42_000_000_000_000))
    }

    @Test func signalWithMissingFields() throws {
        #expect(try decode(.signal, #"{"time":1764450000000,"wifiSignal":-58}"#)
            == .signal(wifi: SignalReading(dBm: -58, time: 1_764_450_000_000), rsrp: nil))
        #expect(try decode(.signal, #"{"time":1764450000000,"rsrp":-97}"#)
            == .signal(wifi: nil, rsrp: SignalReading(dBm: -97, time: 1_764_450_000_000)))
    }

    @Test func responsesCarryCodeAndData() throws {
        let message = try decode(.response(.wifiScan), """
            {"msgId":"a3","time":1764450000900,"code":0,"data":[{"ssid":"We","rssi":-52,"sec":5}]}
            """)
        guard case .response(let response) = message else {
            Issue.record("not a response")
            return
        }
        #expect(response.msgId == "a3")
        #expect(response.code == 0)
        #expect(response.data?.arrayValue?.count == 1)
    }

    @Test func transferStatus() throws {
        let message = try decode(.transferStatus, """
            {"msgId":"91","time":1764450000000,"data":{"targetDeviceId":"gwOld","targetDeviceName":"Old gateway",
             "sourceDeviceId":"gwNew","status":2,"failedCode":""}}
            """)
        #expect(message == .transferStatus(TransferStatusReport(
            targetDeviceId: "gwOld", targetDeviceName: "Old gateway", sourceDeviceId: "gwNew",
            status: .deviceDataInit, failedCode: "", time: 1_764_450_000_000)))
    }

    @Test(arguments: [
        (InboundKind.properties, "not json"),
        (.properties, "[1,2]"),
        (.properties, #"{"time":1764450000000}"#),
        (.properties, #"{"time":"yesterday","data":{}}"#),
        (.properties, #"{"time":-5,"data":{"a":1}}"#),
        (.status, #"{"status":"sleeping"}"#),
        (.status, #"{"status":{"value":2}}"#),
        (.signal, #"{"wifiSignal":"strong"}"#),
        (.signal, #"{"wifiSignal":-999}"#),
        (.signal, #"{"time":1764450000000}"#),
        (.info, #"{"data":[]}"#),
        (.transferStatus, #"{"data":{"targetDeviceId":"a","sourceDeviceId":"b","status":9}}"#),
        (.transferStatus, #"{"data":{"targetDeviceId":"a/b","sourceDeviceId":"b","status":1}}"#),
        (.response(.setProperties), #"{"code":0}"#),
        (.response(.setProperties), #"{"msgId":"0123456789012345678901234567890123","code":0}"#),
        (.response(.setProperties), #"{"msgId":"a","code":"0"}"#),
    ])
    func malformedPayloadsAreRefused(kind: InboundKind, text: String) {
        #expect(throws: PayloadError.self) { try decode(kind, text) }
    }

    @Test func oversizedPayloadIsRefused() {
        let big = "{\"data\":{\"a\":\"" + String(repeating: "x", count: 300 * 1024) + "\"}}"
        #expect(throws: PayloadError.self) { try decode(.properties, big) }
    }
}
