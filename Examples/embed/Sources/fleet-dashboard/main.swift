import Foundation
import ThingAgent

/// Shows Wi-Fi signal updates of one device as they arrive.
final class SignalPanel: DeviceInfoManagerListener {
    func deviceInfoManager(_ manager: DeviceInfoManager, wifiSignalDidUpdate signal: SignalReading) {
        print("\(manager.deviceId): Wi-Fi \(signal.dBm) dBm")
    }
}

// fleet-dashboard CACHE_FILE DEVICE [SECONDS]
// The broker and its credentials come from the environment (THING_AGENT_BROKER, THING_AGENT_USERNAME,
// THING_AGENT_PASSWORD, ...: `. data/demo.env` beside the demo). CACHE_FILE is the dashboard's own cache, never a
// daemon's. Exits 0 when the device answered the set, 1 when it did not.
let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 4, let seconds = Int(arguments.count == 4 ? arguments[3] : "30") else {
    print("usage: fleet-dashboard CACHE_FILE DEVICE [SECONDS]")
    exit(2)
}
var configuration = AgentConfiguration()
try configuration.apply(environment: ProcessInfo.processInfo.environment)
configuration.cache.database = arguments[1]
configuration.mqtt.clientID = "fleet-dashboard"
configuration.api.enabled = false          // a dashboard answers nobody's requests
configuration.events.publish = false     // and publishes no event feed of its own
configuration.metricsAddress = nil      // the service has metrics of its own
let logger = AgentLogger(label: "thing-agent", level: .info, handler: DashboardLogHandler())
let agent = try Agent(configuration: configuration, logger: logger)   // opens and loads the cache: reads work now
let service = Task {                                                  // connect, subscribe, work until cancelled
    do {
        try await agent.run()
    } catch {
        print("the agent stopped: \(error)")                         // refused credentials, unusable TLS, ...
    }
}

let device = agent.deviceInfoManager(deviceId: arguments[2])
print("\(device.deviceId): \(device.deviceInfo?.name ?? "not in the cache yet")")   // from memory, at once
let panel = SignalPanel()
device.addListener(panel)                                             // held weakly, as the device SDKs do

var switchedOn = false
do {
    try await agent.waitUntilConnected(timeout: .seconds(10))        // requests need the broker: wait for it
    try await agent.setProperties(deviceId: device.deviceId, ["switch_1": true])
    print("\(device.deviceId): switched on")
    switchedOn = true
} catch {
    print("\(device.deviceId): not switched on: \(error)")            // not connected, offline, refused, no answer
}
try await Task.sleep(for: .seconds(seconds))
service.cancel()                                                      // graceful stop
await service.value
exit(switchedOn ? 0 : 1)
