/// Strict UTF-8 checks (Unicode 15, table 3-7): no overlong forms, no encoded surrogates, nothing above U+10FFFF.
enum UTF8Validation {
    /// The length (2...4) of the well-formed multi-byte sequence starting at `base[j]` (a byte >= 0x80),
    /// or 0 when it is ill-formed or truncated by `count`.
    @inline(__always)
    static func sequenceLength(_ base: UnsafePointer<UInt8>, at j: Int, count: Int) -> Int {
        let b0 = base[j]
        switch b0 {
        case 0xC2 ... 0xDF:
            return j + 1 < count && isContinuation(base[j + 1]) ? 2 : 0
        case 0xE0 ... 0xEF:
            guard j + 2 < count else { return 0 }
            let b1 = base[j + 1]
            let ok: Bool
            switch b0 {
            case 0xE0: ok = b1 >= 0xA0 && b1 <= 0xBF  // no overlong
            case 0xED: ok = b1 >= 0x80 && b1 <= 0x9F  // no surrogates U+D800...U+DFFF
            default: ok = isContinuation(b1)
            }
            return ok && isContinuation(base[j + 2]) ? 3 : 0
        case 0xF0 ... 0xF4:
            guard j + 3 < count else { return 0 }
            let b1 = base[j + 1]
            let ok: Bool
            switch b0 {
            case 0xF0: ok = b1 >= 0x90 && b1 <= 0xBF  // no overlong
            case 0xF4: ok = b1 >= 0x80 && b1 <= 0x8F  // nothing above U+10FFFF
            default: ok = isContinuation(b1)
            }
            return ok && isContinuation(base[j + 2]) && isContinuation(base[j + 3]) ? 4 : 0
        default:
            // 0x80...0xC1: continuation bytes or overlong 2-byte leads; 0xF5...0xFF: never valid.
            return 0
        }
    }

    @inline(__always)
    static func isContinuation(_ b: UInt8) -> Bool {
        b & 0xC0 == 0x80
    }

    /// Appends the UTF-8 encoding of a scalar value (already checked to be a valid scalar).
    @inline(__always)
    static func append(scalar v: UInt32, to out: inout [UInt8]) {
        if v < 0x80 {
            out.append(UInt8(v))
        } else if v < 0x800 {
            out.append(UInt8(0xC0 | (v >> 6)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        } else if v < 0x10000 {
            out.append(UInt8(0xE0 | (v >> 12)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        } else {
            out.append(UInt8(0xF0 | (v >> 18)))
            out.append(UInt8(0x80 | ((v >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((v >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (v & 0x3F)))
        }
    }
}
