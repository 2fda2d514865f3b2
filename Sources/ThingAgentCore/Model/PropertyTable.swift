/// A device's properties by code. Most devices have a handful: those live in an array kept sorted by code and
/// searched by bisection, as small as a plain array (it matters with a million devices cached). A device with many
/// codes moves to a dictionary, so that neither a lookup nor an insertion grows with the count (a linear search let
/// one device with thousands of codes stall the receive path).
public struct PropertyTable: Sendable, Equatable, Sequence {
    package struct Entry: Sendable, Equatable {
        var code: String
        var value: PropertyValue
    }

    private enum Storage: Sendable {
        case sorted([Entry])
        case hashed([String: PropertyValue])
    }

    /// Beyond this many codes, a dictionary: sorted-array insertions move the entries after the new one.
    static package let arrayLimit = 64

    private var storage = Storage.sorted([])

    public init() {}

    /// Where `code` is in a sorted array, or where it would go.
    private static func position(of code: String, in entries: [Entry]) -> (index: Int, found: Bool) {
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
            switch storage {
            case .sorted(let entries):
                let (index, found) = Self.position(of: code, in: entries)
                return found ? entries[index].value : nil
            case .hashed(let table):
                return table[code]
            }
        }
        set {
            switch storage {
            case .sorted(var entries):
                storage = .sorted([])  // so that `entries` is the only reference and changes in place
                let (index, found) = Self.position(of: code, in: entries)
                switch (found, newValue) {
                case let (true, value?): entries[index].value = value
                case (true, nil): entries.remove(at: index)
                case let (false, value?): entries.insert(Entry(code: code, value: value), at: index)
                case (false, nil): break
                }
                if entries.count > Self.arrayLimit {
                    storage = .hashed(Dictionary(uniqueKeysWithValues: entries.map { ($0.code, $0.value) }))
                } else {
                    storage = .sorted(entries)
                }
            case .hashed(var table):
                storage = .sorted([])
                table[code] = newValue
                storage = .hashed(table)
            }
        }
    }

    /// The codes, in code order.
    public var keys: [String] {
        switch storage {
        case .sorted(let entries): entries.map(\.code)
        case .hashed(let table): table.keys.sorted()
        }
    }

    public var count: Int {
        switch storage {
        case .sorted(let entries): entries.count
        case .hashed(let table): table.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// In code order.
    public func makeIterator() -> some IteratorProtocol<(key: String, value: PropertyValue)> {
        let entries: [(key: String, value: PropertyValue)] = switch storage {
        case .sorted(let entries): entries.map { (key: $0.code, value: $0.value) }
        case .hashed(let table): table.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }
        }
        return entries.makeIterator()
    }

    /// Equal when the same codes hold the same values.
    public static func == (lhs: PropertyTable, rhs: PropertyTable) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case let (.sorted(a), .sorted(b)): return a == b
        case let (.hashed(a), .hashed(b)): return a == b
        default: return lhs.count == rhs.count && lhs.allSatisfy { rhs[$0.key] == $0.value }
        }
    }
}
