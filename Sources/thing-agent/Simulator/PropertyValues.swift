import JSON
import ThingAgent

/// Plausible values for a thing model's properties: where they start and how they move between reports.
enum PropertyValues {
    static let labels = ["Reading", "Night", "Party", "Focus", "Dinner", "Wake up"]

    static func initial(_ spec: PropertySpec, using generator: inout SeededGenerator) -> JSONValue {
        switch (spec.code, spec.kind) {
        case ("uptime", .value(let min, _, _)): return .integer(min)
        case ("battery_percentage", .value(let min, let max, let step)):
            return .integer(snap(Int64.random(in: 70...100, using: &generator), min, max, step))
        case ("temp_current", .value(let min, let max, let step)):
            return .integer(snap(Int64.random(in: 180...260, using: &generator), min, max, step))
        default: return random(spec, using: &generator)
        }
    }

    /// Any valid value (a user changing a setting).
    static func random(_ spec: PropertySpec, using generator: inout SeededGenerator) -> JSONValue {
        switch spec.kind {
        case .bool: return .bool(Bool.random(using: &generator))
        case .value(let min, let max, let step):
            // Mid-range, so that drifting values have room both ways.
            // In Double: a model's range may span all of Int64 (from a --models file), where `max - min` traps.
            let span = Double(max) - Double(min)
            let value = clamped(Double(min) + span * Double.random(in: 0.35...0.55, using: &generator), min, max)
            return .integer(snap(value, min, max, step))
        case .decimal(let min, let max, _):
            return .double(((min + (max - min) * Double.random(in: 0.35...0.55, using: &generator)) * 10).rounded() / 10)
        case .enumeration(let range): return .string(range.randomElement(using: &generator)!)
        case .string(let maxlen): return .string(String(labels.randomElement(using: &generator)!.prefix(maxlen)))
        }
    }

    /// Report-only values that state facts about the fleet (set by the simulator) rather than measurements.
    static let facts: Set<String> = ["zigbee_channel", "sub_device_count"]

    /// The next reading of a report-only value: uptime counts, batteries drain, facts stay, the rest wanders
    /// within range.
    static func drift(_ spec: PropertySpec, _ current: JSONValue, seconds: Double,
                      using generator: inout SeededGenerator) -> JSONValue? {
        guard case .value(let min, let max, let step) = spec.kind, let value = current.int64Value,
              !facts.contains(spec.code) else { return nil }
        switch spec.code {
        case "uptime": return .integer(Swift.min(max, saturating(value, Int64(seconds.rounded()))))
        case "battery_percentage":
            return generator.chance(0.05) ? .integer(Swift.max(min, value - 1)) : nil
        default:
            guard generator.chance(0.6) else { return nil }
            let (delta, overflow) = Int64.random(in: 1...3, using: &generator).multipliedReportingOverflow(by: step ?? 1)
            let move = overflow ? (step ?? 1) : delta
            return .integer(snap(saturating(value, Bool.random(using: &generator) ? move : -move), min, max, step))
        }
    }

    static func snap(_ value: Int64, _ min: Int64, _ max: Int64, _ step: Int64?) -> Int64 {
        let clamped = Swift.min(max, Swift.max(min, value))
        guard let step, step > 1 else { return clamped }
        // The offset from min always fits UInt64, whatever the model's range (as in `PropertySpec.validate`).
        let offset = UInt64(bitPattern: clamped &- min)
        return min &+ Int64(bitPattern: offset / UInt64(step) * UInt64(step))
    }

    /// `a + b`, held at Int64's ends instead of trapping.
    static func saturating(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }

    /// `value` within `min...max` as an integer; a Double at 2^63 would trap in `Int64(_:)`.
    static func clamped(_ value: Double, _ min: Int64, _ max: Int64) -> Int64 {
        guard value < Double(max) else { return max }
        guard value > Double(min) else { return min }
        return Int64(value)
    }
}

/// How a simulated device refuses a property set, with docs/protocol.md's codes: 1003 for a value of the wrong type
/// (or a malformed request), 1004 for a property the model does not have or that may not be set (read-only),
/// 1005 for a value of the right type outside its range, step, enum or length.
enum SetRefusal {
    static func check(_ values: JSONObject, model: ThingModel?) -> (code: Int, message: String)? {
        guard !values.isEmpty else { return (1003, "'data' names no property") }
        guard let model else { return nil }
        for (code, value) in values {
            guard let spec = model.property(code) else {
                return (1004, "\(code): unknown property for product \(model.productId)")
            }
            if spec.access == .ro { return (1004, "\(code): read-only (access ro)") }
            do {
                try spec.validate(value)
            } catch {
                return (hasRightType(value, spec.kind) ? 1005 : 1003, error.description)
            }
        }
        return nil
    }

    static func hasRightType(_ value: JSONValue, _ kind: PropertySpec.Kind) -> Bool {
        switch kind {
        case .bool: value.boolValue != nil
        case .value: if case .integer = value { true } else { false }
        case .decimal: value.doubleValue != nil
        case .enumeration, .string: value.stringValue != nil
        }
    }
}
