/// A signal level in words, by the usual Wi-Fi dBm bands. The one place these bands live: the CLI, the Wi-Fi scan
/// and the simulator all use it.
public enum SignalQuality: String, Sendable, CaseIterable, Comparable, CustomStringConvertible {
    /// Below -70 dBm.
    case weak
    /// -70 to -61 dBm.
    case fair
    /// -60 to -51 dBm.
    case good
    /// -50 dBm and stronger.
    case excellent

    public init(dBm: Int) {
        switch dBm {
        case (-50)...: self = .excellent
        case -60 ..< -50: self = .good
        case -70 ..< -60: self = .fair
        default: self = .weak
        }
    }

    public var description: String { rawValue }

    public static func < (lhs: SignalQuality, rhs: SignalQuality) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
