internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

/// One turn of libmosquitto's network work, in the order `mosquitto_loop` does it (read, write, keepalive), but
/// waiting in poll(2). `mosquitto_loop` waits in select(2), which cannot watch a descriptor numbered FD_SETSIZE (1024)
/// or above: in a process holding that many files or connections it fails with MOSQ_ERR_INVAL ("Invalid function
/// arguments provided") before it even waits.
///
/// A turn reads every packet already waiting (up to `maxPacketsPerTurn`), not one: `mosquitto_loop_read` reads one
/// packet per call for a client that publishes little, so a backlog cost a poll per message. The acknowledgements
/// those packets queued then go out together, corked into as few TCP segments as they fit (one loopback delivery and
/// one wake-up of the broker instead of one per PUBACK).
enum LoopTurn {
    /// Bounds one turn's reading, so that acknowledgements and keepalives are written while a backlog streams in.
    /// The broker sends at most its in-flight window (mosquitto: `max_inflight_messages`, 20 by default) of QoS 1/2
    /// messages before it waits for their acknowledgements, so for those this is rarely the limit; a QoS 0 stream
    /// meets it.
    static let maxPacketsPerTurn = 128

    /// Waits up to `timeoutMilliseconds` for the socket or `wake`, then does what is due. Returns 0 or a
    /// libmosquitto error code, as `mosquitto_loop` does (the library has already closed the socket on an error).
    static func run(_ handle: MosquittoHandle, _ core: ClientCore, timeoutMilliseconds: Int32) -> Int32 {
        let pointer = handle.pointer
        let wake = core.wake
        let socket = libmosquitto.mosquitto_socket(pointer)
        guard socket >= 0 else { return Int32(MOSQ_ERR_NO_CONN.rawValue) }
        // The library's reads of this socket go through the thread's buffer; what it holds, poll cannot see.
        if MosquittoLibrary.readsBuffered { thing_agent_socket_buffer_follow(socket) }
        let buffered = thing_agent_socket_buffer_pending() > 0
        let wantsWrite = libmosquitto.mosquitto_want_write(pointer) || core.answers.withLock { !$0.isEmpty }
        var watched = (
            pollfd(fd: socket, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0),
            pollfd(fd: wake.readDescriptor, events: Int16(POLLIN), revents: 0))
        let ready = withUnsafeMutableBytes(of: &watched) { bytes in
            poll(bytes.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, buffered ? 0 : timeoutMilliseconds)
        }
        if ready < 0 {
            return errno == EINTR ? 0 : Int32(MOSQ_ERR_ERRNO.rawValue)
        }
        let socketEvents = watched.0.revents
        var packetsRead = 0
        // Also when the turn ends in an error: whoever batched the turn's messages hands them on.
        defer { if packetsRead > 0 { core.onReceiveTurnEnd?() } }
        // Errors and hang-ups count as readable, as select reports them: the read then returns the cause.
        if buffered || socketEvents & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            // The PUBACK/PUBREC of a message is queued before on_message runs and written only below, after it
            // returned: a receive path that cuts the socket from on_message keeps the acknowledgement from going out.
            let rc = readWaitingPackets(pointer, core, read: &packetsRead)
            if rc != 0 || libmosquitto.mosquitto_socket(pointer) < 0 { return rc }
        }
        var writable = socketEvents & Int16(POLLOUT) != 0
            || (packetsRead > 0
                && (libmosquitto.mosquitto_want_write(pointer) || core.answers.withLock { !$0.isEmpty }))
        if watched.1.revents & Int16(POLLIN) != 0 {
            wake.drain()
            // Another thread queued a packet after the poll began; the socket is almost always writable.
            writable = true
        }
        if writable {
            // Not once a stop is signalled: a DISCONNECT may be queued (see `MQTTClient.disconnect`).
            let cork = packetsRead > 1 && !core.stopSignalled.load(ordering: .acquiring)
            let rc = corked(socket, of: pointer, if: cork) { writeQueued(pointer, core, socket) }
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

    /// Calls `mosquitto_loop_read` while a call handles a message (or the acknowledgement of one), up to the turn's
    /// bound; a call that handled none found the socket empty, half a packet, or a packet of another kind, and the
    /// next poll takes it from there. Counts the calls that did in `read`.
    private static func readWaitingPackets(_ pointer: OpaquePointer, _ core: ClientCore, read: inout Int) -> Int32 {
        while read < maxPacketsPerTurn {
            let before = core.packetsHandled.load(ordering: .relaxed)
            let rc = libmosquitto.mosquitto_loop_read(pointer, 1)
            if rc != 0 || libmosquitto.mosquitto_socket(pointer) < 0 { return rc }
            if core.packetsHandled.load(ordering: .relaxed) == before { return 0 }
            read += 1
        }
        return 0
    }

    /// Writes the library's queue and the message handler's answers without ever starting one inside a packet of the
    /// other (`HandlerAnswers`): answers a full socket left half written first, and until they are whole nothing
    /// else; then the library's queue; then the answers, once the library has nothing left to write. Returns 0 or
    /// the library's error code.
    static func writeQueued(_ pointer: OpaquePointer, _ core: ClientCore, _ socket: Int32) -> Int32 {
        let waiting = core.answers.withLock { answers in
            answers.isHalfWritten && answers.write(to: socket) == .pending
        }
        if waiting { return 0 }
        let rc = libmosquitto.mosquitto_loop_write(pointer, 1)
        if rc != 0 || libmosquitto.mosquitto_socket(pointer) != socket { return rc }
        if !libmosquitto.mosquitto_want_write(pointer) {
            core.answers.withLock { answers in
                if !answers.isEmpty { _ = answers.write(to: socket) }
            }
        }
        return 0
    }

    /// Runs `write` with TCP_CORK set on `socket` when `cork` (several packets are likely queued), so that
    /// libmosquitto's one send(2) per packet fills segments instead of pushing each; clearing the option sends what
    /// is left at once, so nothing waits for the cork's 200 ms timer.
    private static func corked(_ socket: Int32, of pointer: OpaquePointer, if cork: Bool,
                               _ write: () -> Int32) -> Int32 {
        guard cork else { return write() }
        var on: Int32 = 1, off: Int32 = 0
        let size = socklen_t(MemoryLayout<Int32>.size)
        let set = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &on, size) == 0
        let rc = write()
        // Not once the library closed the socket on an error: its number may already be another file's.
        if set, libmosquitto.mosquitto_socket(pointer) == socket {
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_CORK, &off, size)
        }
        return rc
    }
}
