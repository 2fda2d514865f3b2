/// A device clock running ahead. A time far in the future would win over every later report (stale values lose),
/// freezing a value for good; so a time more than `maxSkew` ahead of the arrival is replaced by the arrival time
/// (docs/protocol.md, "Rules the agent keeps").
extension InboundMessage {
    /// The message with every time later than `arrival + maxSkew` replaced by `arrival`, and whether any was.
    package func correctingClockSkew(arrival: Millis, maxSkew: Millis) -> (message: InboundMessage, corrected: Bool) {
        let limit = arrival.addingReportingOverflow(maxSkew)
        let latest = limit.overflow ? Millis.max : limit.partialValue
        var corrected = false
        func fix(_ time: Millis) -> Millis {
            guard time > latest else { return time }
            corrected = true
            return arrival
        }
        let message: InboundMessage
        switch self {
        case .properties(let values):
            // The common case (no time ahead) keeps the array as it is.
            guard values.contains(where: { $0.value.time > latest }) else { return (self, false) }
            message = .properties(values.map { ($0.code, PropertyValue(value: $0.value.value, time: fix($0.value.time))) })
        case .status(let online, let time, let via):
            message = .status(online: online, time: fix(time), via: via)
        case .signal(let wifi, let rsrp):
            message = .signal(wifi: wifi.map { SignalReading(dBm: $0.dBm, time: fix($0.time)) },
                              rsrp: rsrp.map { SignalReading(dBm: $0.dBm, time: fix($0.time)) })
        case .info(let data, let time):
            message = .info(data, time: fix(time))
        case .transferStatus(var report):
            report.time = fix(report.time)
            message = .transferStatus(report)
        case .response(var response):
            // An info/get answer is merged as an info report at this time.
            response.time = fix(response.time)
            message = .response(response)
        case .unbind(let time):
            message = .unbind(time: fix(time))
        case .otaProgress(var report):
            report.time = fix(report.time)
            message = .otaProgress(report)
        case .event(var event):
            event.time = fix(event.time)
            message = .event(event)
        case .tags(let update, let delete, let time):
            message = .tags(update: update, delete: delete, time: fix(time))
        case .answeredOnly, .query:
            return (self, false)
        case .batch(let items):
            var any = false
            let fixed = items.map { item -> DeviceMessage in
                let (message, corrected) = item.message.correctingClockSkew(arrival: arrival, maxSkew: maxSkew)
                any = any || corrected
                return DeviceMessage(item.device, message)
            }
            return (any ? .batch(fixed) : self, any)
        }
        return (message, corrected)
    }
}
