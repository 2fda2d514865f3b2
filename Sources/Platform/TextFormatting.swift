/// The few pieces of text handling the project took from Foundation's whole library (which brings ICU): trimming
/// blanks, fixed-point numbers and hexadecimal. (Padding is the CLI's `padded(from:to:)`, which counts terminal
/// columns.) FoundationEssentials has none of them.
extension StringProtocol {
    /// Without leading and trailing spaces and tabs (what `trimmingCharacters(in: .whitespaces)` did).
    package func trimmingBlanks() -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

extension Double {
    /// The number with exactly `decimals` digits after the point, rounded half away from zero (`%.Nf`).
    package func fixed(_ decimals: Int) -> String {
        guard isFinite else { return "\(self)" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(self) * scale).rounded()
        // Beyond what an Int64 holds exactly, the plain description is as good as any.
        guard scaled < 9.0e15 else { return "\(self)" }
        let units = Int64(scaled)
        let divisor = Int64(scale)
        let sign = self < 0 && units != 0 ? "-" : ""
        guard decimals > 0 else { return sign + String(units) }
        let fraction = String(units % divisor)
        return sign + String(units / divisor) + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    /// The shortest form: `30` for a whole number, else as Swift prints it (`2.5`) (what `%g` was used for).
    package var shortest: String {
        if self == rounded(), abs(self) < 1e15 { return String(Int64(self)) }
        return "\(self)"
    }
}

extension BinaryInteger {
    /// Lower-case hexadecimal, zero-padded to at least `width` digits (`%02x`).
    package func hex(width: Int) -> String {
        let digits = String(self, radix: 16)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
