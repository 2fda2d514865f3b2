import JSON
import ThingAgentCore

extension Agent {
    /// Asks a device with the `wifiList` ability for the networks it can see (`R/D/thing/wifi/scan`) and returns
    /// them one per SSID (the strongest kept), strongest first, each with its `quality`.
    /// A device that is not cached, or lacks the ability, fails at once with `.unsupported`; nothing is sent.
    public func scanWifiList(_ deviceId: String, timeout: Duration? = nil,
                             force: Bool = false) async throws(RequestError) -> [WifiNetwork] {
        guard let device = cache.device(deviceId) else {
            throw .unsupported(deviceId: deviceId, reason: "not in the cache, so its abilities are unknown")
        }
        guard device.info.supports(.wifiList) else {
            throw .unsupported(deviceId: deviceId, reason: "cannot scan for Wi-Fi networks (no wifiList ability)")
        }
        let answer = try await request(.wifiScan, to: deviceId, data: .object(JSONObject()), timeout: timeout,
                                       force: force)
        do {
            return try WifiNetwork.scanResult(answer.data)
        } catch {
            throw .notSent(reason: "the answer from \(deviceId) is unusable: \(error.reason)")
        }
    }
}
