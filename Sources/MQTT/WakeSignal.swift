#if canImport(Glibc)
import Glibc
#endif

/// A pipe the network thread polls besides its socket, so that a packet queued by another thread (publish,
/// subscribe, disconnect) is written at once rather than at the end of the loop slice. libmosquitto has such a pipe
/// of its own, but only `mosquitto_loop` can watch it, and that waits with select(2) (see `LoopTurn`).
final class WakeSignal: Sendable {
    let readDescriptor: Int32
    private let writeDescriptor: Int32

    init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) == 0 {
            for end in ends {
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            }
        }
        // Without a pipe (no descriptors left) the thread still writes queued packets within one slice.
        readDescriptor = ends[0]
        writeDescriptor = ends[1]
    }

    deinit {
        if readDescriptor >= 0 { _ = close(readDescriptor) }
        if writeDescriptor >= 0 { _ = close(writeDescriptor) }
    }

    /// A full pipe already holds a wake-up, so a failed write loses nothing.
    func signal() {
        guard writeDescriptor >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &buffer, buffer.count) > 0 {}
    }
}
