import Foundation

/// The repository's root directory (this file is Tests/TestSupport/Repository.swift).
public func repositoryRoot() -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
}
