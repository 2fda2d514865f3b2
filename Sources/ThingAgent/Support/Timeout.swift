/// The library's one timeout pattern: runs `operation`, and when it has not ended after `timeout`, runs `expire`,
/// whose job is to make `operation` end (fail what it waits for, close what it writes to). Both run as children of
/// one task group, so nothing outlives the call; cancelling the caller cancels both.
///
/// `expire` is how a wait that cannot be cancelled by itself (a continuation, a publish waiting for its PUBACK)
/// still ends on time.
package func withTimeout<Result: Sendable>(
    _ timeout: Duration,
    _ operation: @escaping @Sendable () async -> Result,
    expire: @escaping @Sendable () async -> Void
) async -> Result {
    await withTaskGroup(of: Result?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            guard (try? await Task.sleep(for: timeout)) != nil else { return nil }
            await expire()
            return nil
        }
        var result: Result?
        while let next = await group.next() {
            guard let next else { continue }
            result = next
            group.cancelAll()
        }
        // The operation's child always returns a value, so the loop only ends once it did.
        return result!
    }
}
