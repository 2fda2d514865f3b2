import Foundation
import Testing
@testable import thing_agent

@Suite("Dates as the CLI prints them")
struct FormatDateTests {
    /// What the CLI printed before it formatted dates itself: Foundation's ISO 8601 style, UTC, whole seconds.
    static func foundation(_ millis: Int64) -> String {
        Date(timeIntervalSince1970: Double(millis) / 1000)
            .formatted(.iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false))
    }

    /// Moments where an off-by-one shows: the epoch and just before it, leap days (2000 is a leap year, 1900 and
    /// 2100 are not), the ends of years and of the four-digit range, the Gregorian calendar's first day.
    static let edges: [Int64] = [
        0, -1, 1, -999, -1000, -1001, 999, 1000, 86_399_999, 86_400_000, -86_400_000, -86_400_001,
        951_782_400_000, 951_868_799_999, 951_868_800_000, -2_203_891_200_000, 4_107_542_400_000,
        1_764_450_001_000, 1_796_135_293_999, 253_402_300_799_000, 253_402_300_799_999,
        -12_219_292_800_000, 946_684_799_999, 946_684_800_000, 1_583_020_800_000, 1_582_934_400_000,
    ]

    @Test("the same text as Foundation's ISO 8601 style, from the Gregorian calendar's first day to the year 9999")
    func matchesFoundationOverTheGregorianRange() {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<20_000).map { _ in Int64.random(in: -12_219_292_800_000...253_402_300_799_999, using: &generator) }
        for millis in Self.edges + random {
            #expect(Format.date(millis) == Self.foundation(millis), "\(millis)")
        }
    }

    /// Before 1582-10-15 Foundation (ICU) switches to the Julian calendar; ISO 8601, and the CLI, stay Gregorian.
    @Test func staysGregorianBefore1582() {
        #expect(Format.date(-62_135_596_800_000) == "0001-01-01T00:00:00")
        #expect(Format.date(-12_219_292_800_001) == "1582-10-14T23:59:59")
        #expect(Format.date(-62_167_219_200_000) == "0000-01-01T00:00:00")
        #expect(Format.date(-62_167_219_200_001) == "-0001-12-31T23:59:59")
    }

    /// Years past 9999 get their digits, not a wrapped or cut year.
    @Test func yearsPast9999() {
        #expect(Format.date(253_402_300_800_000) == "10000-01-01T00:00:00")
        #expect(Format.date(9_223_372_036_854_775) == "294247-01-10T04:00:54")
        #expect(Format.date(9_223_372_036_854_775) == Self.foundation(9_223_372_036_854_775))
    }
}
