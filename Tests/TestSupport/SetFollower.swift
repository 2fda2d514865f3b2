import Foundation
import MQTT
import Synchronization

/// A device that does what a set asks, as firmware does: answers `code` 0, then reports the values it was set to
/// (a property report with the time of the moment). Records every set it received, in order (the `data` object
/// as text), so that a test sees exactly what was sent to it.
public final class SetFollower: Sendable {
    public let device: SimulatedDevice
    private let received = Mutex<[String]>([])
    private let task = Mutex<Task<Void, Never>?>(nil)

    public init(_ device: SimulatedDevice) {
        self.device = device
    }

    /// The `data` of every set received, in order (`{"switch_1":true}`).
    public var sets: [String] { received.withLock { $0 } }

    /// Subscribes to the device's set topic and answers from now on. With `reports` false the device answers but
    /// never reports the new value (a device that ignores what it was told); with `reportFirst` it reports the new
    /// value before it answers (firmware does either). `rewrite` changes the report's text (a device that reports
    /// `20.0` when set to `20`).
    public func start(reports: Bool = true, reportFirst: Bool = false,
                      rewrite: (@Sendable (String) -> String)? = nil) async throws {
        let device = device
        let topic = device.topic("properties/set")
        let stream = device.client.messages
        try await device.client.subscribe(topic, qos: .atLeastOnce)
        let running = Task { [self] in
            for await message in stream where message.topic == topic {
                let text = String(decoding: message.payload, as: UTF8.self)
                guard let msgId = SimulatedDevice.msgId(in: text), let data = Self.data(in: text) else { continue }
                self.received.withLock { $0.append(data) }
                let report = rewrite?(data) ?? data
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                if reports && reportFirst { try? await device.properties(report, time: now) }
                try? await device.client.publish(topic + "_response",
                                                 payload: Array(#"{"msgId":"\#(msgId)","time":\#(now),"code":0}"#.utf8),
                                                 qos: .atLeastOnce)
                if reports && !reportFirst { try? await device.properties(report, time: now) }
            }
        }
        task.withLock { $0 = running }
    }

    public func stop() async {
        task.withLock { $0?.cancel() }
        await device.disconnect()
    }

    /// The `data` object of a set payload: the agent writes it last (`{"msgId","time","data":{...}}`).
    static func data(in text: String) -> String? {
        guard let start = text.range(of: "\"data\":"), let end = text.lastIndex(of: "}"),
              start.upperBound < end else { return nil }
        return String(text[start.upperBound..<end])
    }
}
