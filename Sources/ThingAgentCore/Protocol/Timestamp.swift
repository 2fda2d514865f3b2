/// Unix time in milliseconds, the unit of every `time` in docs/protocol.md.
public typealias Millis = Int64

/// Time as docs/protocol.md counts it.
public enum Timestamp {
    /// Now, in Unix milliseconds.
    public static var current: Millis { now() }

    /// Values below this are taken as seconds (10-digit times); docs/protocol.md accepts those and converts them.
    static package let secondsThreshold: Int64 = 100_000_000_000
    /// Year 5138 in milliseconds: anything above is not a time but garbage.
    static package let maximum: Int64 = 99_999_999_999_999

    /// Normalises a payload's `time` to milliseconds; nil when it is not a plausible time.
    static package func normalize(_ raw: Int64) -> Millis? {
        guard raw >= 0, raw <= maximum else { return nil }
        return raw < secondsThreshold ? raw * 1000 : raw
    }

    package static func now() -> Millis {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
