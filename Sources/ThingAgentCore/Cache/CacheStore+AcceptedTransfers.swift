import SQLite

/// The gateway transfers this agent started, as `meta` rows `transfer.accepted/<gateway>/<target>` = agent time of
/// the start (`/` never occurs in a device id). In the file, so that the daemon trusts a transfer its CLI started;
/// one row per gateway (a new start replaces it); the daemon deletes it when the transfer ends.
extension CacheStore {
    static package let acceptedPrefix = "transfer.accepted/"

    static package func acceptedKey(gateway: String, target: String) -> String {
        "\(acceptedPrefix)\(gateway)/\(target)"
    }

    /// Records that `gateway` is asked to take over `target`; the caller wraps it in a transaction.
    package func recordAcceptedTransfer(gateway: String, target: String, at time: Millis) throws {
        try forgetAcceptedTransfers(of: gateway)
        try setMeta([(key: Self.acceptedKey(gateway: gateway, target: target), value: time)])
    }

    package func isAcceptedTransfer(gateway: String, target: String) throws -> Bool {
        try !database.query("SELECT 1 FROM meta WHERE key = ?",
                            [.text(Self.acceptedKey(gateway: gateway, target: target))]).isEmpty
    }

    package func forgetAcceptedTransfer(gateway: String, target: String) throws {
        try database.run("DELETE FROM meta WHERE key = ?",
                             [.text(Self.acceptedKey(gateway: gateway, target: target))])
    }

    package func forgetAcceptedTransfers(of gateway: String) throws {
        let prefix = "\(Self.acceptedPrefix)\(gateway)/"
        try database.run("DELETE FROM meta WHERE substr(key, 1, ?) = ?",
                             [.integer(Int64(prefix.utf8.count)), .text(prefix)])
    }
}
