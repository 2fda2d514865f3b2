internal import CLazyLibraries

/// SHA-256 over OpenSSL's libcrypto (loaded on first use, CLazyLibraries.h), and HMAC-SHA256 (RFC 2104) over it:
/// what the simulator signs a TuyaLink device's login with, as Tuya's device SDK does.
package enum Digest {
    /// SHA-256's block size in bytes: an HMAC key longer than this is hashed first.
    private static let blockSize = 64

    package static func sha256(_ bytes: [UInt8]) throws(DigestUnavailable) -> [UInt8] {
        if let failure = thing_agent_load_openssl() { throw DigestUnavailable(reason: String(cString: failure)) }
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        bytes.withUnsafeBufferPointer { input in
            _ = thing_agent_openssl_table().pointee.SHA256(input.baseAddress, input.count, &digest)
        }
        return digest
    }

    /// HMAC-SHA256 of `message` keyed by `key`: H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ message)).
    package static func hmacSHA256(key: [UInt8], message: [UInt8]) throws(DigestUnavailable) -> [UInt8] {
        var block = key.count > blockSize ? try sha256(key) : key
        block += [UInt8](repeating: 0, count: blockSize - block.count)
        let inner = try sha256(block.map { $0 ^ 0x36 } + message)
        return try sha256(block.map { $0 ^ 0x5C } + inner)
    }

    /// Lower-case hex, two digits a byte.
    package static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// A digest cannot be computed: OpenSSL's libcrypto is missing (the package depends on it).
package struct DigestUnavailable: Error, CustomStringConvertible {
    package let reason: String
    package var description: String { "SHA-256 is unavailable: \(reason) (install the Debian package libssl3)" }
}
