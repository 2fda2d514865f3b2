/// A device's properties by code: a small array searched linearly, which for the handful of properties a device
/// has is both faster and far smaller than a dictionary (it matters with a million devices cached).
public struct PropertyTable: Sendable, Equatable, Sequence {
    struct Entry: Sendable, Equatable {
        var code: String
        var value: PropertyValue
    }

    private var entries: [Entry] = []

    public init() {}

    public subscript(_ code: String) -> PropertyValue? {
        get { entries.first { $0.code == code }?.value }
        set {
            let index = entries.firstIndex { $0.code == code }
            switch (index, newValue) {
            case let (index?, value?): entries[index].value = value
            case let (index?, nil): entries.remove(at: index)
            case let (nil, value?): entries.append(Entry(code: code, value: value))
            case (nil, nil): break
            }
        }
    }

    public var keys: [String] { entries.map(\.code) }
    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: PropertyValue)> {
        entries.lazy.map { (key: $0.code, value: $0.value) }.makeIterator()
    }

    /// Equal when the same codes hold the same values, whatever order they were first reported in.
    public static func == (lhs: PropertyTable, rhs: PropertyTable) -> Bool {
        lhs.count == rhs.count && lhs.entries.allSatisfy { rhs[$0.code] == $0.value }
    }
}
