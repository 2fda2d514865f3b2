import ThingAgentCore
/// Builds Prometheus' text exposition format (version 0.0.4): `# HELP`, `# TYPE`, then samples.
struct PrometheusText {
    private(set) var text = ""

    enum Kind: String {
        case counter, gauge, histogram
    }

    mutating func family(_ name: String, _ kind: Kind, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
    }

    mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " \(Self.format(value))\n"
    }

    mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Int) {
        sample(name, labels, Double(value))
    }

    /// A one-sample family.
    mutating func single(_ name: String, _ kind: Kind, _ help: String, _ value: Double) {
        family(name, kind, help)
        sample(name, [], value)
    }

    mutating func histogram(_ name: String, _ help: String, _ snapshot: Histogram.Snapshot) {
        family(name, .histogram, help)
        for (bound, count) in snapshot.cumulative {
            sample(name + "_bucket", [("le", Self.format(bound))], count)
        }
        sample(name + "_bucket", [("le", "+Inf")], snapshot.count)
        sample(name + "_sum", [], snapshot.sum)
        sample(name + "_count", [], snapshot.count)
    }

    /// Label values escape backslash, double quote and line feed.
    static func escape(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}
