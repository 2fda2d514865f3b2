import Foundation
import ThingAgent

/// The dashboard's own log backend: every record the agent logs arrives here whole (level, label, message,
/// metadata), to be sent on wherever the service sends its logs. Here: one line on stdout per record.
struct DashboardLogHandler: AgentLogHandler {
    func log(level: AgentLogger.Level, label: String, message: String, metadata: AgentLogger.Metadata) {
        let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        print("dashboard [\(level)] \(label): \(message) \(fields)")
    }
}
