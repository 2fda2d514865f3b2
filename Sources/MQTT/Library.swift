internal import CMosquitto
#if canImport(Glibc)
import Glibc
#endif

/// libmosquitto's process-wide setup. `mosquitto_lib_init` is not thread-safe and must run once; a `static let`
/// initialiser runs exactly once, thread-safely, on first use.
enum MosquittoLibrary {
    private static let initialised: Bool = {
        mosquitto_lib_init()
        return true
    }()

    static func ensureInitialised() {
        _ = initialised
    }
}

/// A `struct mosquitto *`. Sendable because libmosquitto locks its own state once `mosquitto_threaded_set(true)` is
/// called, and this module only touches the handle from the network thread or under `ClientCore`'s lock.
struct MosquittoHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// An owned MQTT 5 property list; freed by `free()` (kept explicit so it can live on the stack of one call).
struct PropertyList: ~Copyable {
    var pointer: OpaquePointer?

    init() {}

    mutating func addString(_ identifier: mqtt5_property, _ value: String) -> Int32 {
        mosquitto_property_add_string(&pointer, Int32(identifier.rawValue), value)
    }

    mutating func addBinary(_ identifier: mqtt5_property, _ value: [UInt8]) -> Int32 {
        value.withUnsafeBytes { bytes in
            mosquitto_property_add_binary(&pointer, Int32(identifier.rawValue), bytes.baseAddress, UInt16(clamping: bytes.count))
        }
    }

    mutating func addInt32(_ identifier: mqtt5_property, _ value: UInt32) -> Int32 {
        mosquitto_property_add_int32(&pointer, Int32(identifier.rawValue), value)
    }

    deinit {
        var owned = pointer
        if owned != nil { mosquitto_property_free_all(&owned) }
    }
}

/// Readers for properties received in a callback (owned by libmosquitto; values are copied out).
enum ReceivedProperties {
    static func string(_ list: OpaquePointer?, _ identifier: mqtt5_property) -> String? {
        guard let list else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard mosquitto_property_read_string(list, Int32(identifier.rawValue), &value, false) != nil, let value else {
            return nil
        }
        defer { free(value) }
        return String(cString: value)
    }

    static func binary(_ list: OpaquePointer?, _ identifier: mqtt5_property) -> [UInt8]? {
        guard let list else { return nil }
        var value: UnsafeMutableRawPointer?
        var length: UInt16 = 0
        guard mosquitto_property_read_binary(list, Int32(identifier.rawValue), &value, &length, false) != nil else {
            return nil
        }
        defer { free(value) }
        guard let value else { return [] }
        return Array(UnsafeRawBufferPointer(start: value, count: Int(length)))
    }
}
