internal import CLazyLibraries
#if canImport(Glibc)
import Glibc
#endif

/// A clean end of a connection: DISCONNECT after everything already queued, then the TCP close in its proper order.
///
/// libmosquitto closes the socket as soon as it has written the DISCONNECT. Closed with unread data (a broker that
/// streams a backlog always has some on the way), a socket is reset instead of closed, and mosquitto, seeing the reset
/// when it next writes to the connection, drops what it had not read yet: the last PUBACKs and the DISCONNECT itself.
/// It then publishes the will and sends those messages again. So a duplicate of the descriptor keeps the connection
/// open past the library's close; this side sends its FIN, reads (and drops: unacknowledged, the broker keeps them for
/// the session) what the broker still sends until the broker closes its side, and only then closes.
enum GracefulClose {
    /// Writes what is queued and the DISCONNECT, for at most `limit` each for the writing and the closing.
    /// Reads nothing meanwhile: a message read now would be handled, and its acknowledgement, queued after the
    /// DISCONNECT, never sent.
    static func disconnect(_ handle: MosquittoHandle, _ core: ClientCore, limit: Duration = .seconds(1)) {
        let pointer = handle.pointer
        let socket = libmosquitto.mosquitto_socket(pointer)
        // Close-on-exec like the library's own: a process started meanwhile must not inherit the connection.
        let held = socket >= 0 ? fcntl(socket, F_DUPFD_CLOEXEC, 0) : -1
        defer { if held >= 0 { closeAfterDraining(held, limit: limit) } }
        let clock = ContinuousClock()
        var deadline = clock.now + limit
        // The message handler's answers first, whole (`HandlerAnswers`): the DISCONNECT must not land inside one.
        // Answers still half written at the deadline end the connection without it, as a loss would.
        while socket >= 0, core.answers.withLock({ !$0.isEmpty }) {
            guard clock.now < deadline, LoopTurn.writeQueued(pointer, core, socket) == 0,
                  libmosquitto.mosquitto_socket(pointer) == socket else { return }
            var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            if core.answers.withLock({ !$0.isEmpty }) { _ = poll(&writable, 1, 50) }
        }
        guard libmosquitto.mosquitto_disconnect(pointer) == 0 else { return }
        deadline = clock.now + limit
        while clock.now < deadline, libmosquitto.mosquitto_socket(pointer) >= 0 {
            // Returns once the queue is written or the socket is full; the library closes it after the DISCONNECT.
            if libmosquitto.mosquitto_loop_write(pointer, 1) != 0 { return }
            if libmosquitto.mosquitto_socket(pointer) < 0 { return }
            var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            _ = poll(&writable, 1, 50)
        }
    }

    /// This side's FIN, then the broker's remaining bytes read and dropped until its FIN (end of file), an error, or
    /// `limit`; then the last close, with nothing left unread.
    private static func closeAfterDraining(_ descriptor: Int32, limit: Duration) {
        _ = shutdown(descriptor, Int32(SHUT_WR))
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while clock.now < deadline {
            var readable = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&readable, 1, 50) < 0, errno != EINTR { break }
            guard readable.revents != 0 else { continue }
            if read(descriptor, &buffer, buffer.count) <= 0 { break }
        }
        _ = close(descriptor)
    }
}
