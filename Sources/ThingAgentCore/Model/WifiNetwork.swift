import JSON

/// One network from a device's Wi-Fi scan (`R/D/thing/wifi/scan`).
public struct WifiNetwork: Sendable, Equatable {
    public var ssid: String
    /// Signal strength in dBm as the device measured it.
    public var rssi: Int
    /// The device's security type code (`sec`), when it reported one.
    public var security: Int?

    /// The security code in words, after the authentication modes of the common Wi-Fi modules (0 open, 1 WEP,
    /// 2 WPA-PSK, 3 WPA2-PSK, 4 WPA/WPA2-PSK, 5 WPA2-Enterprise, 6 WPA3-PSK, 7 WPA2/WPA3-PSK); nil without a code.
    public var securityName: String? {
        guard let security else { return nil }
        let names = ["open", "WEP", "WPA-PSK", "WPA2-PSK", "WPA/WPA2-PSK", "WPA2-Enterprise", "WPA3-PSK", "WPA2/WPA3-PSK"]
        return names.indices.contains(security) ? names[security] : "code \(security)"
    }

    public init(ssid: String, rssi: Int, security: Int? = nil) {
        self.ssid = ssid
        self.rssi = rssi
        self.security = security
    }

    public var quality: SignalQuality { SignalQuality(dBm: rssi) }

    /// docs/protocol.md's shape plus the quality label.
    public var json: JSONObject {
        JSONObject([("ssid", .string(ssid)), ("rssi", .integer(Int64(rssi))),
                    ("sec", security.map { .integer(Int64($0)) } ?? .null), ("quality", .string(quality.rawValue))])
    }
}

extension WifiNetwork {
    /// The networks of a scan answer's `data`: one per SSID (the strongest, since a name seen on several access
    /// points or bands is joined where it is best), strongest first, ties by SSID.
    /// Entries without an SSID (hidden networks cannot be chosen by name) or without an integer `rssi` are skipped;
    /// `data` that is not an array is an error.
    package static func scanResult(_ data: JSONValue?) throws(PayloadError) -> [WifiNetwork] {
        guard let entries = data?.arrayValue else { throw PayloadError("the scan answer's 'data' is not a list of networks") }
        var strongest: [String: WifiNetwork] = [:]
        for entry in entries {
            guard let ssid = entry["ssid"]?.stringValue, !ssid.isEmpty,
                  let raw = entry["rssi"]?.int64Value, let rssi = Int(exactly: raw) else { continue }
            let network = WifiNetwork(ssid: ssid, rssi: rssi, security: entry["sec"]?.int64Value.map(Int.init))
            if let kept = strongest[ssid], kept.rssi >= rssi { continue }
            strongest[ssid] = network
        }
        return strongest.values.sorted { ($0.rssi, $1.ssid) > ($1.rssi, $0.ssid) }
    }
}
