import JSON

extension DeviceSnapshot {
    /// The device as `thing-agent info --json` prints it: every field of the device-information model under
    /// docs/protocol.md's names, then `online`, the signal times and ages, `properties` (code to value) and their times.
    public func json(now: Millis) -> JSONObject {
        var object = info.json
        object["online"] = .bool(online ?? false)
        object["status"] = .string(online.map { $0 ? "online" : "offline" } ?? "unknown")
        object["statusChangedAt"] = statusChangedAt.map(JSONValue.integer) ?? .null
        object["presence"] = presence.map { .string($0.rawValue) } ?? .null
        object["wifiSignalTime"] = wifiSignal.map { .integer($0.time) } ?? .null
        object["wifiSignalAge"] = wifiSignal.map { .double(Double(max(0, now - $0.time)) / 1000) } ?? .null
        object["rsrpTime"] = rsrp.map { .integer($0.time) } ?? .null
        var values = JSONObject()
        var times = JSONObject()
        for (code, property) in properties.sorted(by: { $0.key < $1.key }) {
            values[code] = property.value
            times[code] = .integer(property.time)
        }
        object["properties"] = .object(values)
        object["propertyTimes"] = .object(times)
        if let transfer { object["transfer"] = .object(transfer.json) }
        if !events.isEmpty {
            var latest = JSONObject()
            for (name, event) in events.sorted(by: { $0.key < $1.key }) {
                latest[name] = .object(JSONObject([("params", event.params), ("time", .integer(event.time))]))
            }
            object["events"] = .object(latest)
        }
        object["firstSeen"] = .integer(firstSeen)
        object["updatedAt"] = .integer(updatedAt)
        return object
    }
}

extension TransferInfo {
    /// docs/protocol.md's transfer-status `data` shape, plus the status name.
    public var json: JSONObject {
        JSONObject([
            ("sourceDeviceId", .string(sourceDeviceId)),
            ("targetDeviceId", targetDeviceId.map(JSONValue.string) ?? .null),
            ("targetDeviceName", targetDeviceName.map(JSONValue.string) ?? .null),
            ("status", .integer(Int64(status.rawValue))),
            ("statusName", .string(status.description)),
            ("failedCode", .string(failedCode)),
            ("time", .integer(time)),
        ])
    }
}
