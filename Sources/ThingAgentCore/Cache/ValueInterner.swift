import JSON

/// Gives equal values one shared storage, and parses repeated JSON text once: loading a million devices reads the
/// same property values and hardware descriptions over and over. Bounded, so variety costs a table of fixed size at
/// worst. Not thread-safe: owners serialize access.
final package class ValueInterner {
    private var table: [JSONValue: JSONValue] = [:]
    private var parsed: [String: JSONValue] = [:]
    private let limit: Int

    package init(limit: Int = 65_536) {
        self.limit = limit
    }

    package func intern(_ value: JSONValue) -> JSONValue {
        switch value {
        case .null, .bool, .integer, .double: return value
        default:
            if let shared = table[value] { return shared }
            if table.count >= limit { table.removeAll(keepingCapacity: true) }
            table[value] = value
            return value
        }
    }

    /// Parses JSON text from the cache file once per distinct text.
    package func parse(_ text: String) -> JSONValue {
        if let value = parsed[text] { return value }
        let value = intern(Self.parseUninterned(text))
        if parsed.count >= limit { parsed.removeAll(keepingCapacity: true) }
        parsed[text] = value
        return value
    }

    /// A cached value's text as a value: text that is not JSON (a file written by hand) stays a string.
    static package func parseUninterned(_ text: String) -> JSONValue {
        (try? JSONParser.parse(text)) ?? .string(text)
    }
}
