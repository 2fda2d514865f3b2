/// A JSON object: `(key, value)` pairs in insertion (document) order, keys unique.
///
/// Lookup is linear, which is the fastest option for the small objects of device payloads.
/// Keys are compared by their UTF-8 bytes (RFC 8259 §8.3), not by Unicode canonical equivalence.
/// Equality ignores key order: two objects are equal when they hold the same keys with equal values.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: String, value: JSONValue)

    /// Stored as a struct rather than a tuple: arrays of tuples go through the runtime's generic metadata and
    /// value witnesses on every allocation and release.
    internal struct Member: Sendable {
        var key: String
        var value: JSONValue
    }

    internal var pairs: [Member]

    public init() {
        pairs = []
    }

    /// Builds an object from pairs; on a repeated key the last value wins (at the first key's position).
    public init(_ pairs: [(String, JSONValue)]) {
        self.pairs = pairs.map { Member(key: $0.0, value: $0.1) }
        removeDuplicateKeys()
    }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    /// Takes members whose keys are known to be unique.
    internal init(uniqueMembers: [Member]) {
        self.pairs = uniqueMembers
    }

    public var keys: [String] { pairs.map(\.key) }
    public var values: [JSONValue] { pairs.map(\.value) }
    public var count: Int { pairs.count }
    public var isEmpty: Bool { pairs.isEmpty }
    public var underestimatedCount: Int { pairs.count }

    public struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[Member]>

        public mutating func next() -> (key: String, value: JSONValue)? {
            guard let member = base.next() else { return nil }
            return (member.key, member.value)
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(base: pairs.makeIterator())
    }

    /// The value for `key`; setting `nil` removes the key, setting a new key appends it.
    public subscript(_ key: String) -> JSONValue? {
        get {
            guard let index = index(forKey: key) else { return nil }
            return pairs[index].value
        }
        set {
            if let index = index(forKey: key) {
                if let newValue {
                    pairs[index].value = newValue
                } else {
                    pairs.remove(at: index)
                }
            } else if let newValue {
                pairs.append(Member(key: key, value: newValue))
            }
        }
    }

    public func contains(key: String) -> Bool {
        index(forKey: key) != nil
    }

    /// Position of `key` in the stored order.
    public func index(forKey key: String) -> Int? {
        for i in pairs.indices where utf8Equal(pairs[i].key, key) {
            return i
        }
        return nil
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let index = index(forKey: key) else { return nil }
        return pairs.remove(at: index).value
    }

    /// Sets every pair of `other` into `self` (its values win; new keys are appended in its order).
    public mutating func merge(_ other: JSONObject) {
        for (key, value) in other {
            self[key] = value
        }
    }

    public func merging(_ other: JSONObject) -> JSONObject {
        var copy = self
        copy.merge(other)
        return copy
    }

    // MARK: Duplicate keys

    /// Keeps the first position of each key with the value of its last occurrence.
    internal mutating func removeDuplicateKeys() {
        guard let firstDuplicate = Self.firstDuplicateIndex(pairs) else { return }
        var result = Array(pairs[..<firstDuplicate])
        result.reserveCapacity(pairs.count - 1)
        var positions: [UTF8Key: Int] = [:]
        positions.reserveCapacity(pairs.count)
        for (i, pair) in result.enumerated() {
            positions[UTF8Key(pair.key)] = i
        }
        for pair in pairs[firstDuplicate...] {
            let key = UTF8Key(pair.key)
            if let at = positions[key] {
                result[at].value = pair.value
            } else {
                positions[key] = result.count
                result.append(pair)
            }
        }
        pairs = result
    }

    /// Index of the first pair whose key already appeared before it, or nil when keys are unique.
    internal static func firstDuplicateIndex(_ pairs: [Member]) -> Int? {
        let n = pairs.count
        if n < 2 { return nil }
        if n <= 16 {
            for j in 1 ..< n {
                let key = pairs[j].key
                for i in 0 ..< j where utf8Equal(pairs[i].key, key) {
                    return j
                }
            }
            return nil
        }
        var seen = Set<UTF8Key>(minimumCapacity: n)
        for j in 0..<n where !seen.insert(UTF8Key(pairs[j].key)).inserted {
            return j
        }
        return nil
    }

    // MARK: Equatable, Hashable (order-insensitive)

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        let n = lhs.pairs.count
        guard n == rhs.pairs.count else { return false }
        // Same order: one pass.
        var i = 0
        while i < n, utf8Equal(lhs.pairs[i].key, rhs.pairs[i].key) {
            guard lhs.pairs[i].value == rhs.pairs[i].value else { return false }
            i += 1
        }
        if i == n { return true }
        // Different order: look the rest up.
        if n - i <= 16 {
            for j in i..<n {
                let pair = lhs.pairs[j]
                guard let k = rhs.index(forKey: pair.key), k >= i, rhs.pairs[k].value == pair.value else { return false }
            }
            return true
        }
        var positions: [UTF8Key: Int] = [:]
        positions.reserveCapacity(n - i)
        for k in i..<n {
            positions[UTF8Key(rhs.pairs[k].key)] = k
        }
        for j in i..<n {
            let pair = lhs.pairs[j]
            guard let k = positions[UTF8Key(pair.key)], rhs.pairs[k].value == pair.value else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        // Order-insensitive: a commutative sum of per-pair hashes (as Dictionary does).
        var sum = 0
        for pair in pairs {
            var h = Hasher()
            hashUTF8(pair.key, into: &h)
            h.combine(pair.value)
            sum &+= h.finalize()
        }
        hasher.combine(pairs.count)
        hasher.combine(sum)
    }
}

/// A String hashed and compared by its UTF-8 bytes.
internal struct UTF8Key: Hashable {
    let string: String
    init(_ string: String) { self.string = string }
    static func == (lhs: UTF8Key, rhs: UTF8Key) -> Bool { utf8Equal(lhs.string, rhs.string) }
    func hash(into hasher: inout Hasher) { hashUTF8(string, into: &hasher) }
}

/// Byte equality of two strings' UTF-8 forms (not canonical equivalence, which `==` on String uses).
@inline(__always)
internal func utf8Equal(_ a: String, _ b: String) -> Bool {
    let au = a.utf8
    let bu = b.utf8
    guard au.count == bu.count else { return false }
    let fast = au.withContiguousStorageIfAvailable { ab in
        bu.withContiguousStorageIfAvailable { bb in
            ab.count == 0 || memcmpBytes(ab.baseAddress!, bb.baseAddress!, ab.count)
        }
    }
    if let fast, let result = fast { return result }
    return au.elementsEqual(bu)
}

@inline(__always)
private func memcmpBytes(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
    var i = 0
    while i + 8 <= n {
        if UnsafeRawPointer(a + i).loadUnaligned(as: UInt64.self) != UnsafeRawPointer(b + i).loadUnaligned(as: UInt64.self) {
            return false
        }
        i += 8
    }
    while i < n {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}

internal func hashUTF8(_ s: String, into hasher: inout Hasher) {
    let u = s.utf8
    hasher.combine(u.count)
    let done: Void? = u.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    if done == nil {
        for byte in u { hasher.combine(byte) }
    }
}
