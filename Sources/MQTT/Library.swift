internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

/// libmosquitto, loaded when the first client is made (CLazyLibraries.h says why), and its process-wide setup:
/// `mosquitto_lib_init` is not thread-safe and must run once; a `static let` initialiser runs exactly once,
/// thread-safely, on first use.
enum MosquittoLibrary {
    /// The Debian package that installs the library (`libmosquitto1` on every release the package is built for).
    static let package = "libmosquitto1"

    /// nil once loaded and initialised; the error says what is missing and what to install.
    private static let failure: MQTTError? = {
        if let failure = thing_agent_load_mosquitto() {
            return MQTTError(kind: .other, code: MQTTError.Code.notFound,
                             message: "\(String(cString: failure)): install the Debian package \(package)",
                             context: "loading libmosquitto")
        }
        _ = libmosquitto.mosquitto_lib_init()
        _ = unbufferedReads
        // The wake-up pair only `mosquitto_loop` reads; without it the library writes no byte per queued packet.
        // Where it cannot be skipped the library makes it as before, and nothing else changes.
        _ = thing_agent_skip_mosquitto_wake_pipe()
        return nil
    }()

    /// Why the library reads its sockets unbuffered, a byte per read(2) for each packet's header; nil when its
    /// reads go through the network thread's buffer (`socket_reads.c`). Set up once, before any handle is made.
    static let unbufferedReads: String? = thing_agent_buffer_mosquitto_reads().map { String(cString: $0) }
    static let readsBuffered = unbufferedReads == nil

    static func ensureInitialised() throws(MQTTError) {
        if let failure { throw failure }
    }
}

/// libmosquitto's functions. The first read loads the library; every handle is made after
/// `MosquittoLibrary.ensureInitialised()`, which says what is missing instead.
let libmosquitto: thing_agent_mosquitto_functions = {
    _ = thing_agent_load_mosquitto()
    return thing_agent_mosquitto_table().pointee
}()

/// OpenSSL's functions (libssl's, and libcrypto's through it), loaded by the first read: the TLS diagnosis loads
/// it (with `thing_agent_load_openssl`, which says what is missing) before it reads any.
let libssl: thing_agent_openssl_functions = {
    _ = thing_agent_load_openssl()
    return thing_agent_openssl_table().pointee
}()

/// A C string the libraries return (through a function pointer Swift sees it as optional), as text.
func libraryText(_ text: UnsafePointer<CChar>?) -> String {
    text.map { String(cString: $0) } ?? ""
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
        libmosquitto.mosquitto_property_add_string(&pointer, Int32(identifier.rawValue), value)
    }

    mutating func addBinary(_ identifier: mqtt5_property, _ value: [UInt8]) -> Int32 {
        value.withUnsafeBytes { bytes in
            libmosquitto.mosquitto_property_add_binary(&pointer, Int32(identifier.rawValue), bytes.baseAddress, UInt16(clamping: bytes.count))
        }
    }

    mutating func addInt32(_ identifier: mqtt5_property, _ value: UInt32) -> Int32 {
        libmosquitto.mosquitto_property_add_int32(&pointer, Int32(identifier.rawValue), value)
    }

    deinit {
        var owned = pointer
        if owned != nil { libmosquitto.mosquitto_property_free_all(&owned) }
    }
}

/// Readers for properties received in a callback (owned by libmosquitto; values are copied out).
enum ReceivedProperties {
    static func string(_ list: OpaquePointer?, _ identifier: mqtt5_property) -> String? {
        guard let list else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard libmosquitto.mosquitto_property_read_string(list, Int32(identifier.rawValue), &value, false) != nil, let value else {
            return nil
        }
        defer { free(value) }
        return String(cString: value)
    }

    static func int32(_ list: OpaquePointer?, _ identifier: mqtt5_property) -> UInt32? {
        guard let list else { return nil }
        var value: UInt32 = 0
        guard libmosquitto.mosquitto_property_read_int32(list, Int32(identifier.rawValue), &value, false) != nil else {
            return nil
        }
        return value
    }

    static func binary(_ list: OpaquePointer?, _ identifier: mqtt5_property) -> [UInt8]? {
        guard let list else { return nil }
        var value: UnsafeMutableRawPointer?
        var length: UInt16 = 0
        guard libmosquitto.mosquitto_property_read_binary(list, Int32(identifier.rawValue), &value, &length, false) != nil else {
            return nil
        }
        defer { free(value) }
        guard let value else { return [] }
        return Array(UnsafeRawBufferPointer(start: value, count: Int(length)))
    }
}
