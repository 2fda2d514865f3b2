import Foundation
import MQTT

/// Publishes a prepared list of messages as fast as the broker takes them: QoS 1 with a window of publishes
/// in flight, so the publisher is never what a benchmark measures.
struct Publisher {
    let url: String

    func publish(_ messages: [(topic: String, payload: [UInt8])], qos: QoS, window: Int = 512) async throws {
        let client = try MQTTClient(configuration: MQTTConfiguration(url: url, clientID: "bench-pub-\(UInt32.random(in: 0...UInt32.max))"),
                                    streamMessages: false)
        try await client.connect()
        var index = 0
        while index < messages.count {
            let end = min(messages.count, index + window)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for message in messages[index..<end] {
                    group.addTask { try await client.publish(message.topic, payload: message.payload, qos: qos) }
                }
                try await group.waitForAll()
            }
            index = end
        }
        await client.disconnect()
    }
}

/// Property reports in docs/protocol.md's shape, `devices` devices round robin, times increasing.
func propertyReports(count: Int, devices: Int, root: String = "things") -> [(topic: String, payload: [UInt8])] {
    let base: Int64 = 1_764_450_000_000
    return (0..<count).map { n in
        let device = "dev\(n % devices)"
        let time = base + Int64(n)
        let payload = """
            {"msgId":"m\(n)","time":\(time),"data":{"switch_1":{"value":\(n % 2 == 0),"time":\(time)},\
            "bright_value":{"value":\(10 + n % 990),"time":\(time)},"mode":"white"}}
            """
        return ("\(root)/\(device)/thing/properties", Array(payload.utf8))
    }
}

/// Property reports as devices in the field send them: a `msgId`, the message's `time` and three bare values
/// (`{"msgId":"17","time":...,"data":{"counter":17,"wifi":-57,"switch_1":false}}`), `devices` devices round robin.
func realisticReports(count: Int, devices: Int) -> [(topic: String, payload: [UInt8])] {
    let base: Int64 = 1_764_450_000_000
    return (0..<count).map { n in
        let payload = """
            {"msgId":"\(n)","time":\(base + Int64(n)),"data":{"counter":\(n),"wifi":\(-40 - n % 50),\
            "switch_1":\(n % 2 == 0)}}
            """
        return ("things/dev\(n % devices)/thing/properties", Array(payload.utf8))
    }
}

/// Alink property posts as Linkkit sends them: `{"id","version","params","method"}`, no times, booleans as 0/1.
func alinkPosts(count: Int, devices: Int) -> [(topic: String, payload: [UInt8])] {
    (0..<count).map { n in
        let payload = """
            {"id":"\(n / devices + 1)","version":"1.0","params":{"switch_1":\(n % 2),"bright_value":\(10 + n % 990),\
            "mode":"white"},"method":"thing.event.property.post"}
            """
        return ("/sys/a1BenchPK/dev\(n % devices)/thing/event/property/post", Array(payload.utf8))
    }
}

/// TuyaLink property reports as Tuya's C SDK sends them: a `msgId` counting from "0" per device, `time` in seconds,
/// each value with its own time in seconds (`{"value","time"}`), no `sys.ack` (the SDK's plain report).
func tuyaLinkReports(count: Int, devices: Int) -> [(topic: String, payload: [UInt8])] {
    let base: Int64 = 1_764_450_000
    return (0..<count).map { n in
        let time = base + Int64(n / devices)
        let payload = """
            {"msgId":"\(n / devices)","time":\(time),"data":{"switch_1":{"value":\(n % 2 == 0),"time":\(time)},\
            "cur_power":{"value":\(10 + n % 990),"time":\(time)},"mode":{"value":"white","time":\(time)}}}
            """
        return ("tylink/tl\(n % devices)/thing/property/report", Array(payload.utf8))
    }
}

func signalReports(count: Int, devices: Int, root: String = "things") -> [(topic: String, payload: [UInt8])] {
    let base: Int64 = 1_764_450_000_000
    return (0..<count).map { n in
        ("\(root)/dev\(n % devices)/thing/signal",
         Array("{\"time\":\(base + Int64(n)),\"wifiSignal\":\(-40 - n % 50),\"rsrp\":\(-90 - n % 20)}".utf8))
    }
}

/// A backlog for the whole-process drain: its reports, the topic filter the raw client drains them with, the
/// dialects the daemon speaks for them, the device a topic names (as the agent calls it), and a report setting
/// `mode` to a value (the last of the backlog, which the clock waits for).
struct BacklogShape: Sendable {
    let name: String
    let filter: String
    let dialects: [String]
    let make: @Sendable (Int, Int) -> [(topic: String, payload: [UInt8])]
    /// The native and TuyaLink topics name the device in their second level (`things/D/...`, `tylink/D/...`).
    var device: @Sendable (String) -> String = { String($0.split(separator: "/")[1]) }
    /// Bare values under `data` are read by the native and TuyaLink dialects alike.
    var marker: @Sendable (String) -> [UInt8] = { Array("{\"data\":{\"mode\":\"\($0)\"}}".utf8) }

    static let timedValues = BacklogShape(name: "reports of three timed values", filter: "things/+/thing/properties",
                                              dialects: ["native"], make: { propertyReports(count: $0, devices: $1) })
}
