/// A device's properties by code: an array kept sorted by code and searched by bisection. As small as the plain
/// array it replaces (it matters with a million devices cached), and a lookup stays O(log n) however many codes a
/// device reports (a linear search let one device with thousands of codes stall the receive path).
public struct PropertyTable: Sendable, Equatable, Sequence {
    struct Entry: Sendable, Equatable {
        var code: String
        var value: PropertyValue
    }

    private var entries: [Entry] = []

    public init() {}

    /// Where `code` is, or where it would go.
    private func position(of code: String) -> (index: Int, found: Bool) {
        // Codes arrive in order when the cache loads (SQLite's key order): the end is checked first.
        if let last = entries.last, last.code < code { return (entries.count, false) }
        var low = 0, high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].code < code { low = middle + 1 } else { high = middle }
        }
        return (low, low < entries.count && entries[low].code == code)
    }

    public subscript(_ code: String) -> PropertyValue? {
        get {
            let (index, found) = position(of: code)
            return found ? entries[index].value : nil
        }
        set {
            let (index, found) = position(of: code)
            switch (found, newValue) {
            case let (true, value?): entries[index].value = value
            case (true, nil): entries.remove(at: index)
            case let (false, value?): entries.insert(Entry(code: code, value: value), at: index)
            case (false, nil): break
            }
        }
    }

    /// The codes, in code order.
    public var keys: [String] { entries.map(\.code) }
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: PropertyValue)> {
        entries.lazy.map { (key: $0.code, value: $0.value) }.makeIterator()
    }

    /// Equal when the same codes hold the same values.
    public static func == (lhs: PropertyTable, rhs: PropertyTable) -> Bool {
        lhs.entries == rhs.entries
    }
}
