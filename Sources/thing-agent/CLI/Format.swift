import FoundationEssentials
import JSON
import ThingAgent

/// Small text helpers shared by the commands' human-readable output.
enum Format {
    /// How long a request took, in whole milliseconds; under one millisecond is "<1 ms", not "0 ms".
    static func milliseconds(_ milliseconds: Int64) -> String {
        milliseconds < 1 ? "<1 ms" : "\(milliseconds) ms"
    }

    static func age(_ millis: Millis, now: Millis) -> String {
        let seconds = max(0, (now - millis) / 1000)
        switch seconds {
        case ..<60: return "\(seconds) s ago"
        case ..<3600: return "\(seconds / 60) min ago"
        case ..<86400: return "\(seconds / 3600) h ago"
        default: return "\(seconds / 86400) d ago"
        }
    }

    /// `2026-12-01T14:28:13`, UTC, whole seconds (rounded down). In plain arithmetic: Foundation's ISO 8601
    /// style went through ICU's calendar and time-zone data, most of a short `info`'s time when it printed a date.
    /// The calendar is the proleptic Gregorian one that ISO 8601 prescribes, also before 1582 (where ICU used the
    /// Julian calendar).
    static func date(_ millis: Millis) -> String {
        let seconds = millis.dividedRoundingDown(by: 1000)
        let days = seconds.dividedRoundingDown(by: 86_400)
        let second = seconds - days * 86_400
        let (year, month, day) = civilDate(daysSince1970: days)
        let yearText = year < 0 ? "-" + digits(-year, 4) : digits(year, 4)
        return "\(yearText)-\(digits(month, 2))-\(digits(day, 2))T"
            + "\(digits(second / 3600, 2)):\(digits(second / 60 % 60, 2)):\(digits(second % 60, 2))"
    }

    /// Year, month and day of a count of days since 1970-01-01, in the proleptic Gregorian calendar (counted in
    /// 400-year eras from 0000-03-01, so that the leap day ends each year).
    static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let shifted = days + 719_468
        let era = shifted.dividedRoundingDown(by: 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `value` in decimal, zero-padded to at least `width` digits.
    private static func digits(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count < width ? String(repeating: "0", count: width - text.count) + text : text
    }

    /// A label in `info`'s first column: padded to 16 terminal columns, and whole when longer (Foundation's
    /// `padding(toLength:)` cut a longer property code, so two codes could print as one).
    static func label(_ text: String) -> String {
        text.padded(from: text.terminalWidth, to: 16)
    }

    /// Signal strength as a word, by the usual Wi-Fi dBm bands (the library's `SignalQuality`).
    static func quality(_ dBm: Int) -> String {
        SignalQuality(dBm: dBm).rawValue
    }

    /// Seconds without a needless ".0".
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// Four bars for a dBm level.
    static func bars(_ dBm: Int?) -> String {
        guard let dBm else { return "    " }
        let filled = switch dBm {
        case (-50)...: 4
        case -60 ..< -50: 3
        case -70 ..< -60: 2
        case -85 ..< -70: 1
        default: 0
        }
        return String(repeating: "▮", count: filled) + String(repeating: "▯", count: 4 - filled)
    }

    /// A value for a terminal: strings as they are but with control characters escaped, the rest as JSON.
    static func value(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text.terminalSafe() }
        return value.serialized().terminalSafe()
    }

    /// A plain table: columns padded to their widest cell, in terminal columns (a CJK name or an emoji takes two
    /// per character). Cells hold device-supplied text, so each is made safe for a terminal (and kept on one line)
    /// before it is measured.
    static func table(_ header: [String], _ rows: [[String]]) -> String {
        table(header, cells: rows.flatMap { $0 })
    }

    /// The same from the cells row after row, `header.count` to a row: one array rather than one per row, and the
    /// text built in one buffer (`devices` prints 100,000 rows).
    static func table(_ header: [String], cells: [String]) -> String {
        let columns = header.count
        guard columns > 0 else { return "" }
        var cells = header + cells
        var widths = [Int](repeating: 0, count: columns)
        var cellWidths = [Int](repeating: 0, count: cells.count)
        var bytes = 0
        for index in cells.indices {
            let safe = cells[index].terminalSafe()
            let width = safe.terminalWidth
            widths[index % columns] = max(widths[index % columns], width)
            cellWidths[index] = width
            bytes += safe.utf8.count
            cells[index] = safe
        }
        let spaces = String(repeating: " ", count: widths.max() ?? 0)
        var text = ""
        text.reserveCapacity(bytes + cells.count / columns * (widths.reduce(0, +) + 2 * columns))
        for index in cells.indices {
            let column = index % columns
            if column > 0 { text += "  " }
            text += cells[index]
            if column < columns - 1 {
                text.append(contentsOf: spaces.prefix(widths[column] - cellWidths[index]))
            } else if index < cells.count - 1 {
                text += "\n"
            }
        }
        return text
    }

    static func printJSON(_ value: JSONValue) {
        print(value.prettyPrinted())
    }
}

extension String {
    /// Followed by spaces from its own `width` up to `columns` terminal columns. In plain Swift: Foundation's
    /// `padding(toLength:)` went through NSString for every cell (a quarter of `devices`' time on 100,000 devices)
    /// and counted UTF-16 units, so a cell with a character outside the BMP was cut instead of padded.
    func padded(from width: Int, to columns: Int) -> String {
        let missing = columns - width
        return missing > 0 ? self + String(repeating: " ", count: missing) : self
    }
}

extension Format {
    /// `code=value` pairs in code order, as typed on the command line.
    static func assignments(_ values: [String: JSONValue]) -> String {
        values.sorted { $0.key < $1.key }.map { "\($0.key)=\(value($0.value))" }.joined(separator: " ")
    }
}

extension Int64 {
    /// Division rounding towards minus infinity (Swift's `/` rounds towards zero): a moment before 1970 still
    /// falls in the second, and the day, that it is in.
    func dividedRoundingDown(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}

extension Duration {
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
