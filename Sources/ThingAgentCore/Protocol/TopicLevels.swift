/// The levels of a topic as byte ranges of its UTF-8, found without allocating: a dialect's route runs for every
/// message, and splitting the topic into an array of substrings (and comparing those as strings) was a fifth of an
/// Alink post's receive path.
struct TopicLevels {
    /// At most this many levels; a topic with more is none of a dialect's.
    static let capacity = 10
    private let bytes: UnsafeBufferPointer<UInt8>
    /// Where each level ends (the index of the `/` after it, or the end); level `i` starts after level `i - 1`.
    private var ends: InlineArray<10, Int> = .init(repeating: 0)
    private(set) var count = 0

    /// nil when the topic has more than `capacity` levels.
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
            guard count < Self.capacity - 1 else { return nil }
            ends[count] = index
            count += 1
        }
        ends[count] = bytes.count
        count += 1
    }

    private func start(_ level: Int) -> Int { level == 0 ? 0 : ends[level - 1] + 1 }

    /// Level `level`'s bytes.
    subscript(_ level: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: bytes[start(level)..<ends[level]])
    }

    /// Whether level `level` is `text`.
    func level(_ level: Int, is text: StaticString) -> Bool {
        let range = start(level)..<ends[level]
        guard range.count == text.utf8CodeUnitCount else { return false }
        return UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            .elementsEqual(bytes[range])
    }

    /// Whether level `level` ends with `suffix`.
    func level(_ level: Int, endsWith suffix: StaticString) -> Bool {
        let range = start(level)..<ends[level]
        guard range.count >= suffix.utf8CodeUnitCount else { return false }
        return UnsafeBufferPointer(start: suffix.utf8Start, count: suffix.utf8CodeUnitCount)
            .elementsEqual(bytes[(range.upperBound - suffix.utf8CodeUnitCount)..<range.upperBound])
    }

    /// Level `level` as a string.
    func string(_ level: Int) -> String {
        String(decoding: self[level], as: UTF8.self)
    }
}
