/// One schema step. Versions start at 1; the database's `PRAGMA user_version` records the last one applied.
///
/// A migration runs inside a transaction the `Migrator` opens, so its SQL must not BEGIN or COMMIT,
/// and cannot change `PRAGMA foreign_keys` (SQLite ignores it inside a transaction).
public struct Migration: Sendable {
    public let version: Int
    public let name: String
    /// The SQL run by `execute`; empty for a closure migration.
    public let sql: String
    let body: (@Sendable (Database) throws -> Void)?

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.body = nil
    }

    /// For steps SQL alone cannot express (e.g. rewriting values in Swift).
    public init(version: Int, name: String, _ body: @escaping @Sendable (Database) throws -> Void) {
        self.version = version
        self.name = name
        self.sql = ""
        self.body = body
    }

    func apply(to db: Database) throws {
        if let body { try body(db) } else { try db.execute(sql) }
    }
}

public enum MigrationError: Error, Sendable, CustomStringConvertible {
    /// The database was written by a newer build; running older code on it could lose data.
    case databaseIsNewer(databaseVersion: Int, newestKnown: Int)
    /// Versions must be ≥ 1 and strictly increasing in the list.
    case invalidVersionOrder(version: Int, after: Int)
    /// A migration threw; its transaction was rolled back and user_version left at the previous step.
    case failed(version: Int, name: String, underlying: any Error)

    public var description: String {
        switch self {
        case .databaseIsNewer(let databaseVersion, let newestKnown):
            "database schema version \(databaseVersion) is newer than the newest known migration "
                + "\(newestKnown); refusing to downgrade"
        case .invalidVersionOrder(let version, let after):
            "migration version \(version) after \(after): versions must be ≥ 1 and strictly increasing"
        case .failed(let version, let name, let underlying):
            "migration \(version) (\(name)) failed and was rolled back: \(underlying)"
        }
    }
}

/// Brings a database's schema up to date, recording progress in `PRAGMA user_version`.
public struct Migrator: Sendable {
    public let migrations: [Migration]

    public init(_ migrations: [Migration]) {
        self.migrations = migrations
    }

    /// The version a fully migrated database has (0 without migrations).
    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Applies, each in its own immediate transaction, every migration whose version is above the
    /// database's user_version, in order, setting user_version inside the same transaction.
    ///
    /// A failure therefore leaves the database at the last successful step. Re-running is a no-op.
    /// Throws `MigrationError` for a downgrade (database newer than `latestVersion`), for a badly
    /// ordered list (checked before anything is touched), and for a failed step.
    @discardableResult
    public func migrate(_ db: Database) throws -> (from: Int, to: Int) {
        var previous = 0
        for migration in migrations {
            guard migration.version > previous else {
                throw MigrationError.invalidVersionOrder(version: migration.version, after: previous)
            }
            previous = migration.version
        }
        let from = try db.userVersion
        guard from <= latestVersion else {
            throw MigrationError.databaseIsNewer(databaseVersion: from, newestKnown: latestVersion)
        }
        for migration in migrations where migration.version > from {
            do {
                try db.transaction(.immediate) {
                    // Read again under the write lock: another process may have migrated meanwhile.
                    let current = try db.userVersion
                    guard current < migration.version else { return }
                    try migration.apply(to: db)
                    try db.setUserVersion(migration.version)
                }
            } catch {
                throw MigrationError.failed(version: migration.version, name: migration.name, underlying: error)
            }
        }
        return (from, try db.userVersion)
    }
}
