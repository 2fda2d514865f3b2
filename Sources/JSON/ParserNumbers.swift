extension Parser {
    /// Parses `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` at `i`.
    ///
    /// Integers that fit Int64 never touch floating point. Other numbers use the exact Clinger fast path when the
    /// significand has at most 19 digits, is at most 2^53 and the decimal exponent is within ±22; otherwise the text
    /// is handed to the C library's correctly rounded, locale-independent `strtod` through `Double(String)`.
    @inline(__always)
    mutating func parseNumber() throws(JSONError) -> JSONValue {
        let start = i
        var j = i
        let negative = base[j] == .minus
        if negative { j += 1 }
        guard j < count else { throw invalidNumber(start) }

        var significand: UInt64 = 0
        var digits = 0  // digits accumulated into `significand`, at most 19 (so it cannot overflow)
        var exact = true  // false once a digit did not fit
        var exponent = 0  // decimal exponent applied to `significand`

        let first = base[j]
        if first == .zero {
            j += 1
            if j < count && isDigit(base[j]) { throw invalidNumber(start) }  // leading zero
        } else if isDigit(first) {
            repeat {
                if digits < 19 {
                    significand = significand &* 10 &+ UInt64(base[j] &- .zero)
                    digits += 1
                } else {
                    exact = false
                }
                j += 1
            } while j < count && isDigit(base[j])
        } else {
            throw invalidNumber(start)  // lone "-", "-a", "-.5"
        }

        var isInteger = true
        if j < count && base[j] == .dot {
            isInteger = false
            j += 1
            guard j < count && isDigit(base[j]) else { throw invalidNumber(start) }  // "1."
            repeat {
                if digits < 19 {
                    significand = significand &* 10 &+ UInt64(base[j] &- .zero)
                    digits += 1
                    exponent -= 1
                } else {
                    exact = false
                }
                j += 1
            } while j < count && isDigit(base[j])
        }

        if j < count && (base[j] | 0x20) == UInt8(ascii: "e") {
            isInteger = false
            j += 1
            var exponentNegative = false
            if j < count && (base[j] == .plus || base[j] == .minus) {
                exponentNegative = base[j] == .minus
                j += 1
            }
            guard j < count && isDigit(base[j]) else { throw invalidNumber(start) }  // "1e", "1e+"
            var e = 0
            repeat {
                if e < 1_000_000 { e = e * 10 + Int(base[j] &- .zero) }  // saturate; the slow path reads the text
                j += 1
            } while j < count && isDigit(base[j])
            exponent += exponentNegative ? -e : e
        }
        i = j

        if exact {
            if isInteger {
                if negative {
                    if significand <= UInt64(Int64.max) + 1 {
                        return .integer(Int64(bitPattern: 0 &- significand))
                    }
                } else if significand <= UInt64(Int64.max) {
                    return .integer(Int64(significand))
                }
            } else if significand == 0 {
                return .double(negative ? -0.0 : 0.0)
            } else if significand <= 1 << 53 && exponent >= -22 && exponent <= 22 {
                // Both operands are exact doubles, so one correctly rounded operation gives the right answer.
                var d = Double(significand)
                if exponent < 0 {
                    d /= Parser.powersOfTen[-exponent]
                } else {
                    d *= Parser.powersOfTen[exponent]
                }
                return .double(negative ? -d : d)
            }
        }
        return try parseDoubleSlowly(start: start, end: j)
    }

    private func parseDoubleSlowly(start: Int, end: Int) throws(JSONError) -> JSONValue {
        let text = String(decoding: UnsafeBufferPointer(start: base + start, count: end - start), as: UTF8.self)
        guard let d = Double(text) else { throw invalidNumber(start) }
        guard d.isFinite else { throw JSONError(kind: .numberOutOfRange, offset: start) }
        return .double(d)
    }

    @inline(__always)
    private func isDigit(_ b: UInt8) -> Bool {
        b &- .zero < 10
    }

    private func invalidNumber(_ start: Int) -> JSONError {
        JSONError(kind: .invalidNumber, offset: start)
    }

    static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]
}
