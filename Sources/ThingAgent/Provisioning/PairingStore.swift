import JSON
import SQLite
import Synchronization
import ThingAgentCore

/// Pairings and the devices they activated, in the cache file's tables of migration 7. Every read goes to SQLite
/// (pairings are few and rare), so `pair list` in another process sees what the daemon wrote.
public final class PairingStore: Sendable {
    private let database: Mutex<Database>

    /// Its own connection to the cache file; `readOnly` for `pair list` (no migration).
    public init(path: String, readOnly: Bool = false) throws {
        self.database = Mutex(try CacheSchema.open(path, readOnly: readOnly))
    }

    private func withDatabase<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws -> T {
        try database.withLock { database throws -> T in try body(database) }
    }

    private static let columns = """
        username, space_id, gateway_id, product_id, created_at, expires_at, state, dev_id, ended_at, dialect
        """

    private static func pairing(_ row: Row) -> Pairing? {
        guard let username = row.string("username"), let created = row.int("created_at"),
              let expires = row.int("expires_at"),
              let state = row.string("state").flatMap(Pairing.State.init(rawValue:)) else { return nil }
        return Pairing(username: username, spaceId: row.int("space_id"), gatewayId: row.string("gateway_id"),
                       productId: row.string("product_id"), createdAt: created, expiresAt: expires, state: state,
                       deviceId: row.string("dev_id"), endedAt: row.int("ended_at"), dialect: row.string("dialect"))
    }

    private static func text(_ value: String?) -> SQLiteValue { value.map(SQLiteValue.text) ?? .null }

    func insert(_ pairing: Pairing, tokenHash: String) throws {
        try withDatabase { db in
            try db.run("""
                INSERT INTO pairings (username, token_hash, space_id, gateway_id, product_id, created_at, expires_at,
                    state, dialect) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)
                """, [.text(pairing.username), .text(tokenHash), pairing.spaceId.map(SQLiteValue.integer) ?? .null,
                      Self.text(pairing.gatewayId), Self.text(pairing.productId), .integer(pairing.createdAt),
                      .integer(pairing.expiresAt), Self.text(pairing.dialect)])
        }
    }

    /// Every pairing, newest first (none in a file a build before pairings wrote, read without migrating).
    public func all() throws -> [Pairing] {
        try withDatabase { db in
            guard try db.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pairings'") != nil else {
                return []
            }
            return try db.query("SELECT \(Self.columns) FROM pairings ORDER BY created_at DESC, username")
                .compactMap(Self.pairing)
        }
    }

    func pairing(tokenHash: String) throws -> Pairing? {
        try withDatabase { db in
            try db.query("SELECT \(Self.columns) FROM pairings WHERE token_hash = ?", [.text(tokenHash)])
                .first.flatMap(Self.pairing)
        }
    }

    func pairing(username: String) throws -> Pairing? {
        try withDatabase { db in
            try db.query("SELECT \(Self.columns) FROM pairings WHERE username = ?", [.text(username)])
                .first.flatMap(Self.pairing)
        }
    }

    /// Marks a pending, unexpired pairing as activating `device` and records the device as provisioned, in one
    /// transaction: of two activations racing for one token, exactly one gets true. `complete` or `unclaim` ends it.
    func claim(_ username: String, device: String, gateway: String?, now: Millis) throws -> Bool {
        try withDatabase { db in
            try db.transaction(.immediate) {
                try db.run("""
                    UPDATE pairings SET state = 'activating', dev_id = ?, ended_at = ?
                    WHERE username = ? AND state = 'pending' AND expires_at > ?
                    """, [.text(device), .integer(now), .text(username), .integer(now)])
                guard db.changes == 1 else { return false }
                try db.run("""
                    INSERT INTO provisioned_devices (dev_id, gateway_id, pairing, activated_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT(dev_id) DO UPDATE SET gateway_id = excluded.gateway_id, pairing = excluded.pairing,
                        activated_at = excluded.activated_at
                    """, [.text(device), Self.text(gateway), .text(username), .integer(now)])
                return true
            }
        }
    }

    /// The stored token hash of the pairing of bootstrap user `username` (for a revoke by user name).
    func tokenHash(username: String) throws -> String? {
        try withDatabase { db in
            guard case .text(let hash)? = try db.scalar("SELECT token_hash FROM pairings WHERE username = ?",
                                                        [.text(username)]) else { return nil }
            return hash
        }
    }

    /// The activation succeeded: the pairing is used, and keeps the answer's `data` (the device's credentials)
    /// in case the device asks again because the answer never reached it (`answer(tokenHash:...)`).
    func complete(_ username: String, answer: JSONObject, now: Millis) throws {
        try withDatabase { db in
            try db.run("""
                UPDATE pairings SET state = 'used', ended_at = ?, answer = ? WHERE username = ? AND state = 'activating'
                """, [.integer(now), .text(JSONValue.object(answer).serialized()), .text(username)])
        }
    }

    /// The answer's `data` given to `device` for this token, while the pairing lives (unexpired, its bootstrap
    /// credentials not deleted) and the device is still provisioned by it; nil otherwise.
    func answer(tokenHash: String, username: String, device: String, now: Millis) throws -> JSONObject? {
        try withDatabase { db in
            let row = try db.query("""
                SELECT p.answer AS answer FROM pairings p
                JOIN provisioned_devices d ON d.dev_id = p.dev_id AND d.pairing = p.username
                WHERE p.token_hash = ? AND p.username = ? AND p.dev_id = ? AND p.state = 'used' AND p.cleaned = 0
                    AND p.expires_at > ? AND p.answer IS NOT NULL
                """, [.text(tokenHash), .text(username), .text(device), .integer(now)]).first
            return row?.string("answer").flatMap { try? JSONParser.parse($0) }?.objectValue
        }
    }

    /// Activations a stopped daemon left half done: their pairings are pending again (their devices are
    /// forgotten as provisioned; the next sync deletes what was made of their broker access).
    ///
    /// A device's client and role are recorded as the agent's own here: its claim was written only after the
    /// broker was found to have neither (or only ones the agent made), so whatever the broker has of them now was
    /// made by this activation, even when a kill came between the plugin making them and their record (which
    /// builds that recorded only afterwards left behind).
    func resetInterrupted() throws -> [Pairing] {
        try withDatabase { db in
            try db.transaction(.immediate) {
                let interrupted = try db.query("SELECT \(Self.columns) FROM pairings WHERE state = 'activating'")
                    .compactMap(Self.pairing)
                for pairing in interrupted {
                    try db.run("DELETE FROM provisioned_devices WHERE pairing = ?", [.text(pairing.username)])
                    guard pairing.gatewayId == nil, let device = pairing.deviceId else { continue }
                    let user = AccessPolicy.brokerUser(device, dialect: pairing.dialect)
                    for (kind, name) in [(GrantKind.client, user), (.role, AccessPolicy.deviceRole(device))] {
                        try db.run("INSERT OR IGNORE INTO broker_grants (kind, name, created_at) VALUES (?, ?, ?)",
                                   [.text(kind.rawValue), .text(name), .integer(pairing.endedAt ?? pairing.createdAt)])
                    }
                }
                try db.run("UPDATE pairings SET state = 'pending', dev_id = NULL, ended_at = NULL WHERE state = 'activating'")
                return interrupted
            }
        }
    }

    /// Ends a pending pairing as revoked; nil when no pairing has this token, `revoked` false when it had already
    /// ended.
    func revoke(tokenHash: String, now: Millis) throws -> (pairing: Pairing, revoked: Bool)? {
        try withDatabase { db in
            try db.run("""
                UPDATE pairings SET state = 'revoked', ended_at = ? WHERE token_hash = ? AND state = 'pending'
                """, [.integer(now), .text(tokenHash)])
            let revoked = db.changes == 1
            return try db.query("SELECT \(Self.columns) FROM pairings WHERE token_hash = ?", [.text(tokenHash)])
                .first.flatMap(Self.pairing).map { ($0, revoked) }
        }
    }

    /// Marks the pending pairings whose time ran out as expired, and returns them.
    func expireDue(now: Millis) throws -> [Pairing] {
        try withDatabase { db in
            try db.transaction(.immediate) {
                let due = try db.query("""
                    SELECT \(Self.columns) FROM pairings WHERE state = 'pending' AND expires_at <= ?
                    """, [.integer(now)]).compactMap(Self.pairing)
                try db.run("""
                    UPDATE pairings SET state = 'expired', ended_at = expires_at
                    WHERE state = 'pending' AND expires_at <= ?
                    """, [.integer(now)])
                return due
            }
        }
    }

    /// Ended pairings whose bootstrap credentials may still be at the broker.
    func uncleaned() throws -> [Pairing] {
        try withDatabase { db in
            try db.query("SELECT \(Self.columns) FROM pairings WHERE state NOT IN ('pending', 'activating') AND cleaned = 0")
                .compactMap(Self.pairing)
        }
    }

    /// Its bootstrap credentials are gone: the answer kept for a device that asks again goes with them.
    func markCleaned(_ username: String) throws {
        try withDatabase { db in
            try db.run("UPDATE pairings SET cleaned = 1, answer = NULL WHERE username = ?", [.text(username)])
        }
    }

    /// The pending pairings (unexpired at `now`).
    func pending(now: Millis) throws -> [Pairing] {
        try withDatabase { db in
            try db.query("SELECT \(Self.columns) FROM pairings WHERE state = 'pending' AND expires_at > ?",
                         [.integer(now)]).compactMap(Self.pairing)
        }
    }

    /// The pairings whose broker credentials may still exist: pending ones, and ended ones not cleaned up yet.
    func open() throws -> [Pairing] {
        try withDatabase { db in
            try db.query("SELECT \(Self.columns) FROM pairings WHERE cleaned = 0").compactMap(Self.pairing)
        }
    }

    /// The provisioned devices, each with the gateway that activated it (sub-devices).
    func provisioned() throws -> [String: String?] {
        try withDatabase { db in
            var devices: [String: String?] = [:]
            for row in try db.query("SELECT dev_id, gateway_id FROM provisioned_devices") {
                if let id = row.string("dev_id") { devices[id] = .some(row.string("gateway_id")) }
            }
            return devices
        }
    }

    /// The provisioned devices that speak a dialect other than the native one, with it (their pairing's).
    func provisionedDialects() throws -> [String: String] {
        try withDatabase { db in
            var devices: [String: String] = [:]
            for row in try db.query("""
                SELECT d.dev_id AS dev_id, p.dialect AS dialect FROM provisioned_devices d
                JOIN pairings p ON p.username = d.pairing WHERE p.dialect IS NOT NULL
                """) {
                if let id = row.string("dev_id"), let dialect = row.string("dialect") { devices[id] = dialect }
            }
            return devices
        }
    }

    /// Forgets a removed device, and the sub-devices a removed gateway activated: their topics must not go to
    /// whoever next activates the gateway's id.
    func forget(_ device: String) throws {
        try withDatabase { db in
            try db.transaction(.immediate) {
                try db.run("""
                    UPDATE pairings SET answer = NULL WHERE dev_id IN
                        (SELECT dev_id FROM provisioned_devices WHERE dev_id = ?1 OR gateway_id = ?1)
                    """, [.text(device)])
                try db.run("DELETE FROM provisioned_devices WHERE dev_id = ?1 OR gateway_id = ?1", [.text(device)])
            }
        }
    }

    /// A replacement this agent started finished: the faulty gateway's sub-devices are the new one's now (their
    /// topics follow in the next sync). The cache writer does the same in the transaction that records the
    /// replacement (`ReplacementMoves`); this is for the sync that comes before that flush.
    func moveSubDevices(from faulty: String, to gateway: String) throws {
        try withDatabase { db in
            try db.run("UPDATE provisioned_devices SET gateway_id = ? WHERE gateway_id = ?",
                       [.text(gateway), .text(faulty)])
        }
    }

    /// Undoes a claim whose activation failed afterwards: the pairing is pending again (its token usable) and the
    /// device is no longer recorded as provisioned.
    func unclaim(_ username: String, device: String) throws {
        try withDatabase { db in
            try db.transaction(.immediate) {
                try db.run("""
                    UPDATE pairings SET state = 'pending', dev_id = NULL, ended_at = NULL
                    WHERE username = ? AND state = 'activating' AND dev_id = ?
                    """, [.text(username), .text(device)])
                try db.run("DELETE FROM provisioned_devices WHERE dev_id = ? AND pairing = ?",
                           [.text(device), .text(username)])
            }
        }
    }

    /// The pending pairings, for the cap on how many may be open at once.
    func pendingCount(now: Millis) throws -> Int {
        try withDatabase { db in
            guard case .integer(let count)? = try db.scalar(
                "SELECT count(*) FROM pairings WHERE state = 'pending' AND expires_at > ?", [.integer(now)]) else { return 0 }
            return Int(count)
        }
    }

    // MARK: what the agent made at the broker

    enum GrantKind: String, Sendable {
        case client
        case role
    }

    /// The names of the broker clients or roles the agent created and has not deleted since.
    func grants(_ kind: GrantKind) throws -> Set<String> {
        try withDatabase { db in
            Set(try db.query("SELECT name FROM broker_grants WHERE kind = ?", [.text(kind.rawValue)])
                .compactMap { $0.string("name") })
        }
    }

    /// Records clients or roles the broker confirmed the agent created.
    func recordGrants(_ kind: GrantKind, _ names: [String], now: Millis) throws {
        guard !names.isEmpty else { return }
        try withDatabase { db in
            try db.transaction(.immediate) {
                for name in names {
                    try db.run("INSERT OR IGNORE INTO broker_grants (kind, name, created_at) VALUES (?, ?, ?)",
                               [.text(kind.rawValue), .text(name), .integer(now)])
                }
            }
        }
    }

    func forgetGrants(_ kind: GrantKind, _ names: [String]) throws {
        guard !names.isEmpty else { return }
        try withDatabase { db in
            try db.transaction(.immediate) {
                for name in names {
                    try db.run("DELETE FROM broker_grants WHERE kind = ? AND name = ?", [.text(kind.rawValue), .text(name)])
                }
            }
        }
    }
}
