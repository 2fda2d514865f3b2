import Foundation
import JSON
import ThingAgent

/// Small text helpers shared by the commands' human-readable output.
enum Format {
    static func age(_ millis: Millis, now: Millis) -> String {
        let seconds = max(0, (now - millis) / 1000)
        switch seconds {
        case ..<60: return "\(seconds) s ago"
        case ..<3600: return "\(seconds / 60) min ago"
        case ..<86400: return "\(seconds / 3600) h ago"
        default: return "\(seconds / 86400) d ago"
        }
    }

    static func date(_ millis: Millis) -> String {
        Date(timeIntervalSince1970: Double(millis) / 1000)
            .formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false))
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
        let all = ([header] + rows).map { $0.map { $0.terminalSafe() } }
        let cellWidths = all.map { $0.map(\.terminalWidth) }
        let widths = header.indices.map { column in cellWidths.map { $0[column] }.max() ?? 0 }
        return zip(all, cellWidths).map { row, rowWidths in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padded(from: rowWidths[index], to: widths[index])
            }.joined(separator: "  ")
        }.joined(separator: "\n")
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

extension Duration {
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
