/// The library's one timeout pattern: runs `operation`, and when it has not ended after `timeout`, runs `expire`,
/// whose job is to make `operation` end (fail what it waits for, close what it writes to). Without `expire`, the
/// operation runs as a child task that is cancelled instead (for an operation that ends when cancelled, such as a
/// loop over an event stream). Everything runs within one task group, so nothing outlives the call; cancelling the
/// caller cancels the operation and the timer.
///
/// With `expire`, the operation runs in the calling task itself: a wait that cannot be cancelled by itself (a
/// continuation, a publish waiting for its PUBACK) parks at once, even when every thread of the pool is busy, and
/// still ends on time.
package func withTimeout<Result: Sendable>(
    _ timeout: Duration,
    _ operation: @escaping @Sendable () async -> Result,
    expire: (@Sendable () async -> Void)? = nil
) async -> Result {
    guard let expire else { return await cancelling(operation, after: timeout) }
    return await withTaskGroup(of: Void.self) { group in
        group.addTask {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            await expire()
        }
        let result = await operation()
        group.cancelAll()
        return result
    }
}

/// `operation` as a child task, cancelled once `timeout` has passed.
private func cancelling<Result: Sendable>(_ operation: @escaping @Sendable () async -> Result,
                                          after timeout: Duration) async -> Result {
    await withTaskGroup(of: Result?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            _ = try? await Task.sleep(for: timeout)
            return nil
        }
        var result: Result?
        while let next = await group.next() {
            // The timer's nil (time is up, or the operation ended first): either way nothing is left to wait for.
            guard let next else {
                group.cancelAll()
                continue
            }
            result = next
            group.cancelAll()
        }
        // The operation's child always returns a value, so the loop only ends once it did.
        return result!
    }
}
