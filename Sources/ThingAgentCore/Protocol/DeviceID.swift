/// Device ids are one MQTT topic level: 1 to 64 characters from `A-Z a-z 0-9 . _ : -` (docs/protocol.md).
/// Anything else (wildcards, slashes, control characters, empty, too long) is rejected before it can reach the cache.
public enum DeviceID {
    public static let maxLength = 64

    public static func isValid(_ id: some StringProtocol) -> Bool {
        isValid(utf8: id.utf8)
    }

    /// The same for a `String`, specialized here: called from another module, the generic one looked up its
    /// associated types at run time, which a short `info` paid for at start.
    public static func isValid(_ id: String) -> Bool {
        isValid(utf8: id.utf8)
    }

    static package func isValid(utf8: some Collection<UInt8>) -> Bool {
        var count = 0
        for byte in utf8 {
            count += 1
            guard count <= maxLength, isAllowed(byte) else { return false }
        }
        return count > 0
    }

    @inline(__always)
    static package func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}
