import Glibc

/// Runs `body` on a new detached thread named `name` (at most 15 bytes are kept, the kernel's limit).
///
/// What `Thread` gave, without linking Foundation's whole library (and ICU) into the binary for it.
package func startDetachedThread(name: String? = nil, _ body: @escaping @Sendable () -> Void) {
    let context = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, nil, { context in
        let box = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
        if let name = box.name { nameThisThread(name) }
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

private final class ThreadBody {
    let name: String?
    let body: @Sendable () -> Void

    init(name: String?, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}
