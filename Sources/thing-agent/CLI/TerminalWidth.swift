#if canImport(Glibc)
import Glibc
#endif

extension String {
    /// How many terminal columns the text takes: East Asian wide characters and emoji take two, combining marks
    /// and zero-width characters none. Measured per grapheme with glibc's `wcwidth` on its first scalar, in the
    /// C.UTF-8 locale whatever the user's (the process's own locale is left alone). ASCII, the usual case, is
    /// counted directly: `devices` measures every cell of a table of 100,000 devices.
    var terminalWidth: Int {
        if utf8.allSatisfy({ $0 < 0x80 }) { return utf8.count }
        return TerminalLocale.measuring { reduce(0) { $0 + $1.terminalWidth } } ?? count
    }
}

extension Character {
    /// Two columns for emoji presentation asked for by U+FE0F (`❤️`), which `wcwidth` counts as one.
    fileprivate var terminalWidth: Int {
        guard let first = unicodeScalars.first else { return 0 }
        if unicodeScalars.contains("\u{FE0F}") { return 2 }
        guard let wcwidth = TerminalLocale.shared.wcwidth else { return 1 }
        let width = Int(wcwidth(wchar_t(bitPattern: first.value)))
        // Not printable in the locale (terminalSafe has escaped the controls): shown as one column, like a box.
        return width < 0 ? 1 : width
    }
}

/// The C.UTF-8 locale, made once, and glibc's `wcwidth` (which reads the thread's LC_CTYPE). The Glibc module
/// leaves `wcwidth` out (it is an X/Open addition to <wchar.h>), so it is looked up in the C library already loaded.
private struct TerminalLocale: @unchecked Sendable {
    typealias Width = @convention(c) (wchar_t) -> Int32

    let locale: locale_t?
    let wcwidth: Width?

    static let shared = TerminalLocale(
        locale: newlocale(LC_CTYPE_MASK, "C.UTF-8", nil),
        wcwidth: dlsym(nil, "wcwidth").map { unsafeBitCast($0, to: Width.self) })

    /// Runs `body` with the thread in C.UTF-8; nil when that locale or `wcwidth` is missing.
    static func measuring(_ body: () -> Int) -> Int? {
        guard let locale = shared.locale, shared.wcwidth != nil else { return nil }
        let previous = uselocale(locale)
        defer { uselocale(previous) }
        return body()
    }
}
