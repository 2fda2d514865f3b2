import Foundation
import JSON
import Testing

/// Throughput figures, off by default. Run in release:
///   JSON_BENCH=1 swift test -c release --filter JSONTests.BenchmarkTests
@Suite("Benchmarks", .enabled(if: ProcessInfo.processInfo.environment["JSON_BENCH"] == "1"), .serialized)
struct BenchmarkTests {
    static let payload = #"{"msgId":"45lkj3551234","time":1764450000000,"data":{"switch_1":{"value":true,"time":1764450000000},"bright_value":{"value":800,"time":1764450000000},"mode":"white"}}"#

    static var iterations: Int {
        Int(ProcessInfo.processInfo.environment["JSON_BENCH_N"] ?? "") ?? 1_000_000
    }

    static func report(_ name: String, _ n: Int, _ elapsed: Duration) {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let rate = Double(n) / seconds
        print("benchmark \(name): \(n) in \(String(format: "%.3f", seconds)) s = \(Int(rate)) payloads/s (\(String(format: "%.0f", seconds / Double(n) * 1e9)) ns each)")
    }

    @Test func benchmarkParsePayload() throws {
        let bytes = Array(Self.payload.utf8)
        let n = Self.iterations
        var checksum = 0
        // Warm up.
        for _ in 0 ..< 10_000 {
            checksum &+= try JSONParser.parse(bytes).objectValue?.count ?? 0
        }
        let elapsed = try bytes.withUnsafeBytes { buffer in
            try ContinuousClock().measure {
                for _ in 0 ..< n {
                    let value = try JSONParser.parse(buffer)
                    checksum &+= value.objectValue?.count ?? 0
                }
            }
        }
        Self.report("parse", n, elapsed)
        #expect(checksum == 3 * (n + 10_000))
    }

    @Test func benchmarkParseAndReadFields() throws {
        let bytes = Array(Self.payload.utf8)
        let n = Self.iterations
        var checksum: Int64 = 0
        let elapsed = try ContinuousClock().measure {
            for _ in 0 ..< n {
                let value = try JSONParser.parse(bytes)
                checksum &+= value["time"]?.int64Value ?? 0
                checksum &+= value["data"]?["bright_value"]?["value"]?.int64Value ?? 0
                checksum &+= Int64(value["msgId"]?.stringValue?.utf8.count ?? 0)
            }
        }
        Self.report("parse+read", n, elapsed)
        #expect(checksum != 0)
    }

    @Test func benchmarkSerializePayload() throws {
        let value = try JSONParser.parse(Self.payload)
        let n = Self.iterations
        var total = 0
        let elapsed = ContinuousClock().measure {
            for _ in 0 ..< n {
                total &+= value.serializedBytes().count
            }
        }
        Self.report("serialize", n, elapsed)
        #expect(total == n * Self.payload.utf8.count)
    }

    @Test func benchmarkFoundationJSONSerialization() throws {
        let data = Data(Self.payload.utf8)
        let n = Self.iterations / 5
        var count = 0
        let elapsed = try ContinuousClock().measure {
            for _ in 0 ..< n {
                let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
                count &+= object?.count ?? 0
            }
        }
        Self.report("Foundation JSONSerialization (reference)", n, elapsed)
        #expect(count == 3 * n)
    }
}
