import FoundationEssentials
import Platform

/// The Wi-Fi password of `network add`: `--wifi-password P`, or `--wifi-password-file PATH` (`-` reads stdin) so
/// that it need not show in `ps` or the shell's history. `--password` still works there, deprecated: elsewhere it
/// is the broker password, and `network` never talks to the broker, so the two meanings do not meet.
enum WifiPassword {
    static let options = [
        OptionSpec(name: "wifi-password", valueName: "P", help: "WPA password (8 to 63 characters); shows in ps"),
        OptionSpec(name: "wifi-password-file", valueName: "PATH",
                   help: "read the WPA password from the file's first line (- for stdin)"),
        OptionSpec(name: "password", valueName: "P", help: "deprecated: the same as --wifi-password"),
    ]

    /// The password given, if any. Two forms at once, or a file that cannot be read, is a usage error.
    static func read(_ arguments: ParsedArguments) throws -> String? {
        let given = options.map(\.name).filter { arguments.value($0) != nil }
        guard given.count <= 1 else {
            throw CommandFailure(code: .usage, message: "give the Wi-Fi password once, not with --"
                                 + given.joined(separator: " and --"))
        }
        if let password = arguments.value("wifi-password") { return password }
        if let path = arguments.value("wifi-password-file") { return try firstLine(of: path) }
        if let password = arguments.value("password") {
            Console.error("warning: --password for the Wi-Fi password is deprecated (it is the broker password's "
                          + "name, and shows in ps): use --wifi-password-file PATH, or - for stdin")
            return password
        }
        return nil
    }

    private static func firstLine(of path: String) throws -> String {
        let data = try? readWholeFile(path == "-" ? "/dev/stdin" : path)
        guard let data else {
            throw CommandFailure(code: .usage, message: "cannot read the Wi-Fi password file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let password = line.hasSuffix("\r") ? String(line.dropLast()) : String(line)
        guard !password.isEmpty else {
            throw CommandFailure(code: .usage, message: "the Wi-Fi password file \(path) is empty")
        }
        return password
    }
}
