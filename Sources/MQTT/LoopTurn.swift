internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

/// One turn of libmosquitto's network work, in the order `mosquitto_loop` does it (read, write, keepalive), but
/// waiting in poll(2). `mosquitto_loop` waits in select(2), which cannot watch a descriptor numbered FD_SETSIZE (1024)
/// or above: in a process holding that many files or connections it fails with MOSQ_ERR_INVAL ("Invalid function
/// arguments provided") before it even waits.
enum LoopTurn {
    /// Waits up to `timeoutMilliseconds` for the socket or `wake`, then does what is due. Returns 0 or a
    /// libmosquitto error code, as `mosquitto_loop` does (the library has already closed the socket on an error).
    static func run(_ handle: MosquittoHandle, wake: WakeSignal, timeoutMilliseconds: Int32) -> Int32 {
        let pointer = handle.pointer
        let socket = libmosquitto.mosquitto_socket(pointer)
        guard socket >= 0 else { return Int32(MOSQ_ERR_NO_CONN.rawValue) }
        let wantsWrite = libmosquitto.mosquitto_want_write(pointer)
        var watched = [
            pollfd(fd: socket, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: wake.readDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        if poll(&watched, nfds_t(watched.count), timeoutMilliseconds) < 0 {
            return errno == EINTR ? 0 : Int32(MOSQ_ERR_ERRNO.rawValue)
        }
        let socketEvents = watched[0].revents
        // Errors and hang-ups count as readable, as select reports them: the read then returns the cause.
        if socketEvents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            // The PUBACK/PUBREC of a message is queued before on_message runs and written only below, after it
            // returned: a receive path that cuts the socket from on_message keeps the acknowledgement from going out.
            let rc = libmosquitto.mosquitto_loop_read(pointer, 1)
            if rc != 0 || libmosquitto.mosquitto_socket(pointer) < 0 { return rc }
        }
        var writable = socketEvents & Int16(POLLOUT) != 0
        if watched[1].revents & Int16(POLLIN) != 0 {
            wake.drain()
            // Another thread queued a packet after the poll began; the socket is almost always writable.
            writable = true
        }
        if writable {
            let rc = libmosquitto.mosquitto_loop_write(pointer, 1)
            if rc != 0 || libmosquitto.mosquitto_socket(pointer) < 0 { return rc }
            // A TLS handshake that waits to write is driven by the read call (the write call leaves it alone, where
            // `mosquitto_loop` would step the handshake itself); with nothing to read the call does nothing.
            if socketEvents & Int16(POLLOUT) != 0, libmosquitto.mosquitto_want_write(pointer) {
                let rc = libmosquitto.mosquitto_loop_read(pointer, 1)
                if rc != 0 || libmosquitto.mosquitto_socket(pointer) < 0 { return rc }
            }
        }
        return libmosquitto.mosquitto_loop_misc(pointer)
    }
}
