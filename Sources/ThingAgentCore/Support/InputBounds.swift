/// Limits on numbers that come from outside (config file, environment, flags, API requests), checked where they
/// come in, so that no later conversion (to `Duration`, `Int`, milliseconds) can trap.
public enum InputBounds {
    /// The longest time a setting, flag or request may give, in seconds: about 31 years, far beyond any sensible
    /// value and far inside what `Duration` and Int64 milliseconds hold (`Duration.seconds(1e300)` traps).
    public static let maxSeconds: Double = 1_000_000_000

    /// The longest firmware image URL an upgrade may name (catalog, flag, API request), in bytes: far beyond any
    /// real download address, and it goes to the device in `ota/start`, a small message.
    public static let maxFirmwareURLBytes = 2048
    /// The longest firmware version, in bytes (`1.10.0-beta.3` is 13); it is stored, compared and shown everywhere.
    public static let maxFirmwareVersionBytes = 64

    /// `value` seconds as a checked number: finite, at most `maxSeconds`, above zero (or zero when `allowZero`).
    public static func seconds(_ value: Double, allowZero: Bool = false) -> Double? {
        guard value.isFinite, value <= maxSeconds, value > 0 || (allowZero && value == 0) else { return nil }
        return value
    }

    /// Text (a flag, an environment variable) as a checked number of seconds.
    public static func seconds(_ text: String, allowZero: Bool = false) -> Double? {
        Double(text).flatMap { seconds($0, allowZero: allowZero) }
    }

    /// Seconds as a message shows them: `10`, not `10.0`; `0.5` as it is.
    public static func text(seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
    }
}
