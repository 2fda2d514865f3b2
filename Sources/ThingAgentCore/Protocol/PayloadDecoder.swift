import JSON

/// Turns a payload into an `InboundMessage`, enforcing every rule of docs/protocol.md's "Payloads".
/// Pure: no I/O, no clock (the arrival time is passed in and used where a payload has no `time`).
package struct PayloadDecoder: Sendable {
    package init() {}

    /// docs/protocol.md: payloads over 256 KiB are refused.
    static package let maxPayloadBytes = 256 * 1024
    /// Deep nesting is never a valid report; the parser stops early instead of recursing.
    static package let maxDepth = 16
    static package let maxMsgIdLength = 32
    static package let maxPropertyCodeLength = 64

    package func decode(_ kind: InboundKind, payload: UnsafeRawBufferPointer, arrival: Millis) throws(PayloadError) -> InboundMessage {
        let object = try Self.object(payload)
        let time = try Self.time(object["time"], key: "time") ?? arrival

        switch kind {
        case .properties: return try decodeProperties(object, time: time)
        case .status: return try decodeStatus(object, time: time)
        case .signal: return try decodeSignal(object, time: time)
        case .info:
            guard let data = object["data"]?.objectValue else { throw PayloadError("info report has no 'data' object") }
            return .info(data, time: time)
        case .transferStatus: return try decodeTransferStatus(object, time: time)
        case .response: return try decodeResponse(object, time: time)
        case .unbind: return .unbind(time: time)
        case .otaProgress: return .otaProgress(try OTAProgressReport.decode(object, time: time))
        case .event:
            guard let data = object["data"]?.objectValue else { throw PayloadError("event has no 'data' object") }
            let eventTime = try Self.time(data["eventTime"], key: "eventTime") ?? time
            return .event(try Self.event(data["eventCode"]?.stringValue, params: data["outputParams"], time: eventTime))
        }
    }

    private func decodeProperties(_ object: JSONObject, time: Millis) throws(PayloadError) -> InboundMessage {
        guard let data = object["data"]?.objectValue else { throw PayloadError("property report has no 'data' object") }
        return .properties(try Self.properties(data, time: time))
    }

    /// A payload as a JSON object, within the size and depth bounds: what every dialect reads first.
    static package func object(_ payload: UnsafeRawBufferPointer) throws(PayloadError) -> JSONObject {
        guard payload.count <= maxPayloadBytes else {
            throw PayloadError("payload of \(payload.count) bytes is over the 256 KiB limit")
        }
        let root: JSONValue
        do {
            root = try JSONParser.parse(payload, maxDepth: maxDepth)
        } catch {
            throw PayloadError("not valid JSON: \(error)")
        }
        guard let object = root.objectValue else { throw PayloadError("payload is not a JSON object") }
        return object
    }

    /// Property codes and values: `{"value": v, "time": t}` carries its own time, anything else is a bare value at
    /// `time`. Every dialect's property reports.
    static package func properties(_ data: JSONObject, time: Millis) throws(PayloadError)
        -> [(code: String, value: PropertyValue)] {
        var values: [(code: String, value: PropertyValue)] = []
        values.reserveCapacity(data.count)
        for (code, raw) in data {
            guard !code.isEmpty, code.utf8.count <= maxPropertyCodeLength else {
                throw PayloadError("property code '\(code.prefix(80))' is empty or longer than 64 bytes")
            }
            if let wrapped = raw.objectValue, let value = wrapped["value"] {
                let valueTime = try Self.time(wrapped["time"], key: "\(code).time") ?? time
                values.append((code, PropertyValue(value: value, time: valueTime)))
            } else {
                values.append((code, PropertyValue(value: raw, time: time)))
            }
        }
        return values
    }

    private func decodeStatus(_ object: JSONObject, time: Millis) throws(PayloadError) -> InboundMessage {
        switch object["status"] {
        case .string("online")?: return .status(online: true, time: time)
        case .string("offline")?: return .status(online: false, time: time)
        case .object(let inner)?:
            let statusTime = try Self.time(inner["time"], key: "status.time") ?? time
            switch inner["value"]?.int64Value {
            case 1: return .status(online: true, time: statusTime)
            case 3: return .status(online: false, time: statusTime)
            default: throw PayloadError("status value must be 1 (online) or 3 (offline)")
            }
        default:
            throw PayloadError("status must be \"online\", \"offline\" or {\"value\":1|3}")
        }
    }

    private func decodeSignal(_ object: JSONObject, time: Millis) throws(PayloadError) -> InboundMessage {
        let wifi = try Self.dBm(object["wifiSignal"], key: "wifiSignal")
        let rsrp = try Self.dBm(object["rsrp"], key: "rsrp")
        guard wifi != nil || rsrp != nil else { throw PayloadError("signal report has neither wifiSignal nor rsrp") }
        return .signal(wifi: wifi.map { SignalReading(dBm: $0, time: time) },
                       rsrp: rsrp.map { SignalReading(dBm: $0, time: time) })
    }

    private func decodeTransferStatus(_ object: JSONObject, time: Millis) throws(PayloadError) -> InboundMessage {
        guard let data = object["data"]?.objectValue else { throw PayloadError("transfer status has no 'data' object") }
        guard let target = data["targetDeviceId"]?.stringValue, DeviceID.isValid(target) else {
            throw PayloadError("transfer status needs a valid 'targetDeviceId'")
        }
        guard let source = data["sourceDeviceId"]?.stringValue, DeviceID.isValid(source) else {
            throw PayloadError("transfer status needs a valid 'sourceDeviceId'")
        }
        guard let code = data["status"]?.int64Value, let status = TransferStatus(rawValue: Int(code)) else {
            throw PayloadError("transfer 'status' must be an integer from 0 to 6")
        }
        let name = try Self.optionalString(data["targetDeviceName"], key: "targetDeviceName")
        let failed = try Self.optionalString(data["failedCode"], key: "failedCode") ?? ""
        return .transferStatus(TransferStatusReport(
            targetDeviceId: target, targetDeviceName: name, sourceDeviceId: source,
            status: status, failedCode: failed, time: time))
    }

    private func decodeResponse(_ object: JSONObject, time: Millis) throws(PayloadError) -> InboundMessage {
        guard let msgId = object["msgId"]?.stringValue, (1...Self.maxMsgIdLength).contains(msgId.utf8.count) else {
            throw PayloadError("response needs a 'msgId' string of 1 to 32 characters")
        }
        guard let code = object["code"]?.int64Value, let small = Int(exactly: code) else {
            throw PayloadError("response needs an integer 'code'")
        }
        let message = try Self.optionalString(object["message"], key: "message")
        return .response(Response(msgId: msgId, code: small, message: message, data: object["data"], time: time))
    }

    /// An event by its name and output parameters: every dialect's events. The name follows the action-name rule
    /// (letters, digits, `_`, at most 50); the parameters are an object or absent.
    static package func event(_ name: String?, params: JSONValue?, time: Millis) throws(PayloadError) -> ThingEvent {
        guard let name, RequestKind.isActionName(name) else {
            throw PayloadError("an event needs a name of 1 to 50 letters, digits or '_'")
        }
        switch params {
        case nil, .null?: return ThingEvent(name: name, params: .object([:]), time: time)
        case .object(let object)?: return ThingEvent(name: name, params: .object(object), time: time)
        default: throw PayloadError("an event's parameters must be an object")
        }
    }

    // MARK: field helpers

    static package func time(_ value: JSONValue?, key: String) throws(PayloadError) -> Millis? {
        guard let value, !value.isNull else { return nil }
        guard let raw = value.int64Value, let millis = Timestamp.normalize(raw) else {
            throw PayloadError("'\(key)' must be Unix time in milliseconds (or seconds)")
        }
        return millis
    }

    static package func dBm(_ value: JSONValue?, key: String) throws(PayloadError) -> Int? {
        guard let value, !value.isNull else { return nil }
        guard let raw = value.int64Value, (-200...50).contains(raw) else {
            throw PayloadError("'\(key)' must be an integer dBm between -200 and 50")
        }
        return Int(raw)
    }

    static package func optionalString(_ value: JSONValue?, key: String) throws(PayloadError) -> String? {
        guard let value, !value.isNull else { return nil }
        guard let string = value.stringValue else { throw PayloadError("'\(key)' must be a string") }
        return string
    }
}
