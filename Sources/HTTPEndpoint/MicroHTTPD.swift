internal import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#endif

/// libmicrohttpd's functions, loaded when the first server starts rather than when the process does.
///
/// Linked in, the library and what it needs (GnuTLS, nettle, GMP, p11-kit, libidn2, libunistring, libtasn1, libffi)
/// were mapped and relocated by every `thing-agent` process, about 1.1 ms of CPU each, while only the daemon with a
/// metrics address ever serves HTTP: `info` and the other short commands now start without them.
struct MicroHTTPD: @unchecked Sendable {
    typealias StopDaemon = @convention(c) (OpaquePointer?) -> Void
    typealias CreateResponse = @convention(c) (Int, UnsafeMutableRawPointer?, MHD_ResponseMemoryMode) -> OpaquePointer?
    typealias DestroyResponse = @convention(c) (OpaquePointer?) -> Void
    typealias AddHeader = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> MHD_Result
    typealias QueueResponse = @convention(c) (OpaquePointer?, UInt32, OpaquePointer?) -> MHD_Result

    /// The shared object of Debian's libmicrohttpd12 (what libmicrohttpd-dev's headers describe).
    static let soname = "libmicrohttpd.so.12"

    /// MHD_start_daemon, variadic: called through `thing_agent_start_daemon` (shim.h).
    let startDaemon: UnsafeMutableRawPointer
    /// MHD_get_connection_info, variadic: called through `thing_agent_connection_fd` (shim.h).
    let connectionInfo: UnsafeMutableRawPointer
    let stopDaemon: StopDaemon
    let createResponse: CreateResponse
    let destroyResponse: DestroyResponse
    let addHeader: AddHeader
    let queueResponse: QueueResponse

    /// Debian's name for the package that ships `soname`; releases after the 64-bit time_t transition add `t64`.
    /// scripts/package reads the build host's name for Depends.
    static let package = "libmicrohttpd12 (libmicrohttpd12t64 on Debian trixie and Ubuntu 24.04)"

    /// Loaded once, on first use; the error says what is missing and what to install.
    static let shared: Result<MicroHTTPD, HTTPServerError> = load()

    private static func load() -> Result<MicroHTTPD, HTTPServerError> {
        guard let library = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(HTTPServerError(
                message: "the metrics endpoint needs \(soname): install the Debian package \(package) (\(reason))",
                libraryMissing: true))
        }
        func symbol<T>(_ name: String, as type: T.Type) throws(HTTPServerError) -> T {
            guard let address = dlsym(library, name) else {
                throw HTTPServerError(message: "\(soname) has no \(name): install the Debian package \(package)",
                                      libraryMissing: true)
            }
            return unsafeBitCast(address, to: type)
        }
        do throws(HTTPServerError) {
            return .success(MicroHTTPD(
                startDaemon: try symbol("MHD_start_daemon", as: UnsafeMutableRawPointer.self),
                connectionInfo: try symbol("MHD_get_connection_info", as: UnsafeMutableRawPointer.self),
                stopDaemon: try symbol("MHD_stop_daemon", as: StopDaemon.self),
                createResponse: try symbol("MHD_create_response_from_buffer", as: CreateResponse.self),
                destroyResponse: try symbol("MHD_destroy_response", as: DestroyResponse.self),
                addHeader: try symbol("MHD_add_response_header", as: AddHeader.self),
                queueResponse: try symbol("MHD_queue_response", as: QueueResponse.self)))
        } catch {
            return .failure(error)
        }
    }
}
