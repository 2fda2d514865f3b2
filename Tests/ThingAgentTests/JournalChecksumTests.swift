import Testing
@testable import ThingAgent
@testable import ThingAgentCore

/// The journal's checksum must stay the IEEE CRC-32 that journals already on disk were written with.
@Suite("Journal checksum")
struct JournalChecksumTests {
    /// The CRC-32 one bit at a time, straight from the polynomial: the definition the fast one must agree with.
    private func bitwise(_ bytes: [UInt8]) -> UInt32 {
        var crc = ~UInt32(0)
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return ~crc
    }

    private func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { CRC32.checksum($0) }
    }

    @Test func isTheStandardCRC32() {
        #expect(checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(checksum([]) == 0)
    }

    @Test func agreesWithTheBitwiseDefinitionAtEveryLengthAndAlignment() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<9 {
            for end in stride(from: start, through: bytes.count, by: 7) {
                // Read in place, so the eight-byte loads start at every offset from an aligned address.
                let fast = bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
                #expect(fast == bitwise(Array(bytes[start..<end])), "bytes \(start)..<\(end)")
            }
        }
    }
}
