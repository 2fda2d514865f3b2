import Foundation
import JSON

/// The JSON module on a typical request payload: parse, parse and read fields, serialize, and Foundation's
/// JSONSerialization on the same bytes for reference. Nanoseconds per payload.
enum JSONBenchmark {
    static let payload = #"{"msgId":"45lkj3551234","time":1764450000000,"data":{"switch_1":{"value":true,"time":1764450000000},"bright_value":{"value":800,"time":1764450000000},"mode":"white"}}"#

    static func run(iterations n: Int) async throws -> [(name: String, nanoseconds: Double)] {
        let bytes = Array(payload.utf8)
        var checksum = 0
        for _ in 0..<10_000 { checksum &+= try JSONParser.parse(bytes).objectValue?.count ?? 0 }   // warm up
        let parse = try await Measure.seconds {
            try bytes.withUnsafeBytes { buffer in
                for _ in 0..<n { checksum &+= try JSONParser.parse(buffer).objectValue?.count ?? 0 }
            }
        }
        let read = try await Measure.seconds {
            for _ in 0..<n {
                let value = try JSONParser.parse(bytes)
                checksum &+= Int(truncatingIfNeeded: value["time"]?.int64Value ?? 0)
                checksum &+= Int(truncatingIfNeeded: value["data"]?["bright_value"]?["value"]?.int64Value ?? 0)
                checksum &+= value["msgId"]?.stringValue?.utf8.count ?? 0
            }
        }
        let value = try JSONParser.parse(bytes)
        let serialize = await Measure.seconds {
            for _ in 0..<n { checksum &+= value.serializedBytes().count }
        }
        let data = Data(bytes)
        let foundationRuns = max(1, n / 5)
        let foundation = try await Measure.seconds {
            for _ in 0..<foundationRuns {
                checksum &+= (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.count ?? 0
            }
        }
        guard checksum != 0 else { throw BenchError("the JSON benchmark computed nothing") }
        return [("parse", parse / Double(n) * 1e9), ("parse and read three fields", read / Double(n) * 1e9),
                ("serialize", serialize / Double(n) * 1e9),
                ("Foundation JSONSerialization (reference)", foundation / Double(foundationRuns) * 1e9)]
    }
}
