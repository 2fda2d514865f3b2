import Foundation

/// A fresh directory per test, removed when the value is released.
/// (Private to this target on purpose: the SQLite tests need nothing else from shared test support.)
final class TemporaryDirectory {
    let path: String
    private var lockedPaths: [String] = []

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/sqlite-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// Makes a file or directory unwritable, even for root: chmod, and where root ignores modes,
    /// the immutable attribute. Returns false when neither works here.
    func makeUnwritable(_ target: String) -> Bool {
        var isDirectory: ObjCBool = false
        _ = FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory)
        chmod(target, isDirectory.boolValue ? 0o555 : 0o444)
        lockedPaths.append(target)
        if !Self.isWritable(target, directory: isDirectory.boolValue) { return true }
        guard Self.chattr("+i", target) else { return false }
        return !Self.isWritable(target, directory: isDirectory.boolValue)
    }

    /// Whether `makeUnwritable` works on this machine (it does not for root without chattr).
    static let canMakeUnwritable: Bool = {
        guard let dir = try? TemporaryDirectory() else { return false }
        let probe = dir.file("probe")
        guard FileManager.default.createFile(atPath: probe, contents: Data()) else { return false }
        return dir.makeUnwritable(probe)
    }()

    deinit {
        for target in lockedPaths.reversed() {
            _ = Self.chattr("-i", target)
            chmod(target, 0o755)
        }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Whether writing is actually possible (not what the mode bits say: root bypasses them).
    private static func isWritable(_ target: String, directory: Bool) -> Bool {
        if directory {
            let probe = target + "/.probe-" + UUID().uuidString
            let fd = open(probe, O_CREAT | O_WRONLY, 0o644)
            guard fd >= 0 else { return false }
            close(fd)
            unlink(probe)
            return true
        }
        let fd = open(target, O_WRONLY)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }

    private static func chattr(_ flag: String, _ target: String) -> Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr") else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [flag, target]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}

/// The bytes of a file, for checking that a failed open left it untouched.
func contents(of path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}

func fileSize(_ path: String) -> Int? {
    (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int
}
