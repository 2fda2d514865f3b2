/// Device-supplied text bound for a terminal. A name holding ESC sequences could recolour the terminal, set its
/// title or overwrite lines; every control character is shown as a visible escape instead (`--json` output and the
/// cache keep the exact text).
extension String {
    /// This text with control characters (C0, DEL, C1) and bidirectional overrides written as `\u{1B}`;
    /// newlines are kept when `keepingNewlines` (multi-line output the program itself composed).
    public func terminalSafe(keepingNewlines: Bool = false) -> String {
        guard unicodeScalars.contains(where: { Self.needsEscape($0, keepingNewlines) }) else { return self }
        var result = ""
        result.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            if Self.needsEscape(scalar, keepingNewlines) {
                result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, _ keepingNewlines: Bool) -> Bool {
        switch scalar.value {
        case 0x0A: !keepingNewlines
        case 0x00...0x1F, 0x7F...0x9F: true
        // Bidirectional embeddings, overrides and isolates: they reorder what follows on the line.
        case 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
