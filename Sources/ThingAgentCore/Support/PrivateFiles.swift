#if canImport(Glibc)
import Glibc
#endif

/// The one way the agent creates a file beside its cache (the cache itself, the journal, the storage status, a
/// lock): readable and writable by the agent's user only (0600), whatever the umask. The cache holds backup Wi-Fi
/// passwords, and SQLite gives the `-wal` and `-shm` files the mode of the main file, so they follow.
/// A file that already exists keeps its mode: a person may have chosen another one (0640 for a group).
public enum PrivateFiles {
    public static let mode: mode_t = 0o600

    /// Opens `path` with `flags` (O_CREAT is added); a file created by this call gets `mode` exactly.
    /// Returns the descriptor, or -1 with `errno` set, like open(2).
    public static func open(_ path: String, flags: Int32) -> Int32 {
        var fd = Glibc.open(path, flags | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd >= 0 {
            // open(2) applies the umask; a umask that takes the owner's bits away must not leave the file unusable.
            _ = fchmod(fd, mode)
            return fd
        }
        guard errno == EEXIST else { return -1 }
        fd = Glibc.open(path, flags & ~(O_CREAT | O_EXCL) | O_CLOEXEC)
        return fd
    }

    /// Creates `path` empty with `mode` when nothing is there; a file already there is left alone. Errors are left
    /// to whoever opens the file next (SQLite names the file in its own error).
    public static func createIfMissing(_ path: String) {
        let fd = open(path, flags: O_RDWR)
        if fd >= 0 { close(fd) }
    }

    /// Whether a file that exists can be read by users other than its owner (mode bits for "other").
    public static func isReadableByOthers(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & 0o004 != 0
    }
}
