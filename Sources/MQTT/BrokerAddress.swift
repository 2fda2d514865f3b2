/// Host, port and transport parsed from one of `MQTTConfiguration.brokers`.
struct BrokerAddress: Sendable, Equatable {
    /// The URL as configured.
    var url: String
    var host: String
    var port: Int
    var usesTLS: Bool

    /// Accepts `mqtt://host[:port][/]` and `mqtts://host[:port][/]`; IPv6 hosts go in brackets.
    init(parsing url: String) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(kind: .invalidURL, code: MQTTError.Code.invalid, message: why, context: "url \"\(url)\"")
        }
        self.url = url
        guard let schemeEnd = url.firstRange(of: "://") else { throw invalid("expected mqtt://host:port or mqtts://host:port") }
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

extension BrokerAddress {
    /// Every broker of a list: at least one, all `mqtt://` or all `mqtts://` (one connection's TLS is set up once,
    /// for whichever broker it reaches).
    static func list(_ urls: [String]) throws(MQTTError) -> [BrokerAddress] {
        guard !urls.isEmpty else {
            throw MQTTError(kind: .invalidURL, code: MQTTError.Code.invalid, message: "no broker given",
                            context: "the broker list")
        }
        var addresses: [BrokerAddress] = []
        for url in urls { addresses.append(try BrokerAddress(parsing: url)) }
        if Set(addresses.map(\.usesTLS)).count > 1 {
            throw MQTTError(kind: .invalidURL, code: MQTTError.Code.invalid,
                            message: "the brokers of a list all use mqtt:// or all mqtts://",
                            context: "the broker list \(urls.joined(separator: ","))")
        }
        return addresses
    }
}
