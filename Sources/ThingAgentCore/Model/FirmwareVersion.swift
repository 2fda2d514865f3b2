/// A firmware version as devices report it: dotted numbers (`1.10.0`), optionally with a suffix after `-`
/// (`2.0.0-rc1`). Ordered component by component, numerically; a missing component counts as 0; a suffixed
/// version sorts before the plain one (`2.0.0-rc1` < `2.0.0`), and two suffixes compare as text.
public struct FirmwareVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let text: String
    package let components: [Int]
    package let suffix: String?

    /// nil when `text` is not dotted numbers (an empty part, a letter before the suffix).
    public init?(_ text: String) {
        let dash = text.firstIndex(of: "-")
        let numbers = dash.map { text[..<$0] } ?? Substring(text)
        let parts = numbers.split(separator: ".", omittingEmptySubsequences: false)
        var components: [Int] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 9, part.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(part) else {
                return nil
            }
            components.append(n)
        }
        guard !components.isEmpty else { return nil }
        self.text = text
        self.components = components
        suffix = dash.map { String(text[text.index(after: $0)...]) }
    }

    public var description: String { text }

    public static func < (a: FirmwareVersion, b: FirmwareVersion) -> Bool { compare(a, b) < 0 }

    public static func == (a: FirmwareVersion, b: FirmwareVersion) -> Bool { compare(a, b) == 0 }

    public func hash(into hasher: inout Hasher) {
        var trimmed = components
        while trimmed.count > 1, trimmed.last == 0 { trimmed.removeLast() }
        hasher.combine(trimmed)
        hasher.combine(suffix)
    }

    /// < 0 when `a` is older, 0 when the same, > 0 when `a` is newer.
    package static func compare(_ a: FirmwareVersion, _ b: FirmwareVersion) -> Int {
        for index in 0..<max(a.components.count, b.components.count) {
            let l = index < a.components.count ? a.components[index] : 0
            let r = index < b.components.count ? b.components[index] : 0
            if l != r { return l < r ? -1 : 1 }
        }
        switch (a.suffix, b.suffix) {
        case (nil, nil): return 0
        case (nil, _): return 1
        case (_, nil): return -1
        case let (l?, r?): return l == r ? 0 : (l < r ? -1 : 1)
        }
    }

    /// Whether `candidate` is newer than `current`; a version that does not parse is never newer, and a current
    /// version that does not parse is older than any that does (a device reporting garbage is behind).
    public static func isNewer(_ candidate: String, than current: String?) -> Bool {
        guard let new = FirmwareVersion(candidate) else { return false }
        guard let current, let old = FirmwareVersion(current) else { return true }
        return new > old
    }
}
