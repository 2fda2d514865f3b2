import Glibc

/// Runs `body` on a new detached thread named `name` (at most 15 bytes are kept, the kernel's limit), `nice` steps
/// below the process's priority (Linux keeps a nice value per thread; the scheduler then gives the thread a smaller
/// share of a busy core, and the same share of an idle one).
///
/// What `Thread` gave, without linking Foundation's whole library (and ICU) into the binary for it.
package func startDetachedThread(name: String? = nil, nice: Int32 = 0, _ body: @escaping @Sendable () -> Void) {
    let context = Unmanaged.passRetained(ThreadBody(name: name, nice: nice, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, nil, { context in
        let box = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
        if let name = box.name { nameThisThread(name) }
        if box.nice > 0 { lowerThisThreadsPriority(by: box.nice) }
        box.body()
        return nil
    }, context)
    // Out of threads or memory: nothing to recover to, as Foundation's Thread would also have stopped here.
    precondition(result == 0, "pthread_create failed: \(result)")
    pthread_detach(thread)
}

/// The name `ps -L`, `top -H` and a debugger show: the kernel's `comm` of the thread (pthread_setname_np's way;
/// Glibc's module map leaves that function out).
private func nameThisThread(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

/// On Linux `setpriority(PRIO_PROCESS, 0, …)` sets the calling thread's nice value alone. A failure leaves the
/// thread at the process's priority, which is only slower for others.
private func lowerThisThreadsPriority(by steps: Int32) {
    let which = __priority_which_t(PRIO_PROCESS.rawValue)
    errno = 0
    let current = getpriority(which, 0)
    guard errno == 0 else { return }
    _ = setpriority(which, 0, min(19, current + steps))
}

private final class ThreadBody {
    let name: String?
    let nice: Int32
    let body: @Sendable () -> Void

    init(name: String?, nice: Int32, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.nice = nice
        self.body = body
    }
}
