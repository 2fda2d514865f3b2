/// Host, port and transport parsed from `MQTTConfiguration.url`.
struct BrokerAddress: Sendable, Equatable {
    var host: String
    var port: Int
    var usesTLS: Bool

    /// Accepts `mqtt://host[:port][/]` and `mqtts://host[:port][/]`; IPv6 hosts go in brackets.
    init(parsing url: String) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(kind: .invalidURL, code: MQTTError.Code.invalid, message: why, context: "url \"\(url)\"")
        }
        guard let schemeEnd = url.range(of: "://") else { throw invalid("expected mqtt://host:port or mqtts://host:port") }
        switch url[..<schemeEnd.lowerBound].lowercased() {
        case "mqtt": usesTLS = false
        case "mqtts": usesTLS = true
        default: throw invalid("unsupported scheme (use mqtt or mqtts)")
        }
        var rest = url[schemeEnd.upperBound...]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains("/") || rest.contains("@") || rest.contains("?") {
            throw invalid("paths, queries and user info are not supported; put credentials in the configuration")
        }
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw invalid("missing host") }
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else { throw invalid("port must be 1...65535") }
            port = value
        } else {
            port = usesTLS ? 8883 : 1883
        }
    }
}
