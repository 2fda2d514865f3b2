import Foundation
import ThingAgent

/// Shows Wi-Fi signal updates of one device as they arrive.
final class SignalPanel: DeviceInfoManagerListener {
    func deviceInfoManager(_ manager: DeviceInfoManager, wifiSignalDidUpdate signal: SignalReading) {
        print("\(manager.deviceId): Wi-Fi \(signal.dBm) dBm")
    }
}

// fleet-dashboard BROKER_URL CACHE_FILE DEVICE
let arguments = CommandLine.arguments
guard arguments.count == 4 else {
    print("usage: fleet-dashboard BROKER_URL CACHE_FILE DEVICE")
    exit(2)
}
var configuration = AgentConfiguration()
configuration.broker = arguments[1]
configuration.database = arguments[2]
configuration.clientID = "fleet-dashboard"
let logger = AgentLogger(label: "thing-agent", level: .info, handler: DashboardLogHandler())
let agent = try Agent(configuration: configuration, logger: logger)   // opens and loads the cache: reads work now
let service = Task { try await agent.run() }                          // connect, subscribe, work until cancelled

let device = agent.deviceInfoManager(deviceId: arguments[3])
print("\(device.deviceId): \(device.deviceInfo?.name ?? "not in the cache yet")")   // from memory, at once
let panel = SignalPanel()
device.addListener(panel)                                             // held weakly, as the device SDKs do

do {
    try await agent.setProperties(deviceId: device.deviceId, ["switch_1": true])
    print("\(device.deviceId): switched on")
} catch {
    print("\(device.deviceId): not switched on: \(error)")            // offline, refused, no answer, ...
}
try await Task.sleep(for: .seconds(30))
service.cancel()                                                      // graceful stop
_ = try? await service.value
