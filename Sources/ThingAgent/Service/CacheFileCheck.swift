import FoundationEssentials
import Glibc
import SQLite
import Synchronization
import ThingAgentCore

/// The daemon's periodic look at its files (from the flusher thread, every second): the journal (see
/// `CacheWriter.checkJournal`) and the cache file.
///
/// - A cache file deleted or replaced under the daemon is written again from the open connection, which still
///   reads the old file: `VACUUM INTO` a new file, close every connection to the old one, put the new file in
///   place (a file found there is kept as `<database>.replaced-<ms>`), reopen. Memory then writes its pending
///   changes into it as usual, so nothing memory or the journal holds is lost. Intake is held meanwhile.
/// - A cache file (or its `-wal`) that cannot be written (immutable, read-only mount) holds intake until it can:
///   nothing more is acknowledged, and the broker keeps what comes meanwhile.
final class CacheFileCheck: Sendable {
    let path: String
    let writer: CacheWriter
    let local: LocalStore?
    private let identity: Mutex<(device: UInt64, inode: UInt64)?>

    init(path: String, writer: CacheWriter, local: LocalStore?) {
        self.path = path
        self.writer = writer
        self.local = local
        identity = Mutex(Self.identity(of: path))
    }

    func run() {
        writer.checkJournal()
        checkCacheFile()
    }

    private var storage: StorageMonitor { writer.storage }

    private func checkCacheFile() {
        let now = Self.identity(of: path)
        let known = identity.withLock { $0 }
        if now == nil || (known != nil && now! != known!) {
            let what = now == nil ? "was deleted" : "was replaced by another file"
            storage.fail(path, .check, "the cache file \(path) \(what); writing it again from memory",
                         holdsIntake: true)
            do {
                try rewrite()
            } catch {
                storage.fail(path, .check, "the cache file \(path) \(what); cannot write it again yet: \(error)",
                             holdsIntake: true)
                return
            }
            identity.withLock { $0 = Self.identity(of: path) }
            storage.recovered(path, .check)
            return
        }
        for file in [path, path + "-wal"] where access(file, F_OK) == 0 && access(file, W_OK) != 0 {
            let reason = String(cString: strerror(errno))
            storage.fail(path, .check, "the cache file \(file) is not writable (\(reason)); holding new messages "
                         + "until it is", holdsIntake: true)
            return
        }
        storage.recovered(path, .check)
    }

    /// Writes the whole cache file again at `path` from the connection that still reads the old one.
    private func rewrite() throws {
        let rebuilt = path + ".rebuild"
        unlink(rebuilt)
        // VACUUM INTO creates its file with SQLite's default mode; an empty private file is taken as it is.
        PrivateFiles.createIfMissing(rebuilt)
        defer { unlink(rebuilt) }  // left only when something failed: its space is wanted back
        try writer.replaceStore { old in
            try old.database.execute("VACUUM INTO '\(rebuilt.replacing("'", with: "''"))'")
            // SQLite's last connection to a WAL file checkpoints it and removes `-wal` and `-shm` by name when it
            // closes, and a new connection at the path takes whatever `-wal` it finds there as its own. So the old
            // connections leave the WAL alone when they close (the local store's closes meanwhile; the cache's
            // when it is released), the old `-wal` and `-shm` names are freed (the open connections keep their
            // files), and only then does the new file take the path.
            let moveIntoPlace = { [path] in
                try old.database.leaveWALOnClose()
                unlink(path + "-wal")
                unlink(path + "-shm")
                if access(path, F_OK) == 0 {
                    guard rename(path, "\(path).replaced-\(Timestamp.now())") == 0 else {
                        throw CacheFileError(path: path, operation: "move aside", code: errno)
                    }
                }
                guard rename(rebuilt, path) == 0 else {
                    throw CacheFileError(path: rebuilt, operation: "rename into place", code: errno)
                }
            }
            if let local { try local.reopen(around: moveIntoPlace) } else { try moveIntoPlace() }
            return try CacheStore(path: path)
        }
    }

    private static func identity(of path: String) -> (device: UInt64, inode: UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }
}

struct CacheFileError: Error, Sendable, CustomStringConvertible {
    let path: String
    let operation: String
    let code: Int32

    var description: String { "cannot \(operation) the cache file \(path): \(String(cString: strerror(code)))" }
}
