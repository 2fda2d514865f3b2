import JSON
import MQTT
import Synchronization
import ThingAgent

/// The device's own `ota/progress` reports, heard directly while `ota` waits: the cache file, read every few
/// hundred milliseconds, holds where the upgrade stands and how it ended, but a fast device moves through
/// several stages between two reads. Subscribed before the upgrade starts, so no report is missed.
final class UpgradeReports: Sendable {
    struct Report: Sendable {
        var stage: OTAStage
        var progress: Int
        var time: Millis
    }
    private let client: MQTTClient
    private let heard = Mutex<(reports: [Report], latest: Millis)>(([], 0))
    private let listening: Mutex<Task<Void, Never>?> = Mutex(nil)

    private init(client: MQTTClient) {
        self.client = client
    }

    /// Subscribes to `device`'s progress reports of `version`; nil when the broker cannot be used (the command
    /// then shows what the file says, which is enough to end correctly).
    static func listen(_ configuration: AgentConfiguration, device: String, version: String) async -> UpgradeReports? {
        guard let client = try? MQTTClient(configuration: configuration.mqtt.connection(clientID: configuration.commandClientID))
        else { return nil }
        let reports = UpgradeReports(client: client)
        let stream = client.messages
        do {
            try await client.connect()
            try await client.subscribe(configuration.topics.otaProgress(device), qos: .atLeastOnce)
        } catch {
            await client.disconnect()
            return nil
        }
        let task = Task { [reports] in
            for await message in stream {
                guard let object = try? JSONParser.parse(message.payload), let data = object["data"],
                      data["version"]?.stringValue == version,
                      let stage = data["state"]?.stringValue.flatMap(OTAStage.init) else { continue }
                let time = object["time"]?.int64Value ?? 0
                let report = Report(stage: stage, progress: Int(min(max(data["progress"]?.int64Value ?? 0, 0), 100)), time: time)
                reports.record(report)
            }
        }
        reports.listening.withLock { $0 = task }
        return reports
    }

    private func record(_ report: Report) {
        heard.withLock { heard in
            heard.reports.append(report)
            heard.latest = max(heard.latest, report.time)
        }
    }

    /// The reports heard since the last call, in order.
    func take() -> [Report] {
        heard.withLock { heard in
            defer { heard.reports = [] }
            return heard.reports
        }
    }

    /// The device time of the newest report heard.
    var latest: Millis { heard.withLock { $0.latest } }

    func stop() async {
        listening.withLock { $0 }?.cancel()
        await client.disconnect()
    }
}
