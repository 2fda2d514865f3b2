import ThingAgent

/// The exit codes every subcommand uses (documented in the README and in `thing-agent --help`).
enum ExitCode: Int32 {
    case success = 0
    /// Something failed: unknown device, unreadable cache, failed action.
    case failure = 1
    /// Bad command line: unknown option, missing argument, bad value.
    case usage = 2
    /// A request was invalid for the device's thing model; nothing was published.
    case invalid = 3
    /// The device refused the request (non-zero code).
    case refused = 4
    /// The device did not answer in time.
    case timeout = 5
    /// No broker: could not connect, or the request could not be sent.
    case noBroker = 6
    /// The device is known to be offline; nothing was sent.
    case offline = 7

    static let table = """
        Exit codes:
          0  success
          1  failure (unknown device, unreadable cache, an action failed, too many requests in flight)
          2  bad command line
          3  invalid for the device's thing model; nothing was published
          4  refused by the device
          5  no answer in time
          6  no broker (cannot connect, or the request could not be sent)
          7  device offline; nothing was sent (a command with --force sends anyway)
        """
}

/// An error that ends the command with a message and an exit code.
struct CommandFailure: Error, CustomStringConvertible {
    let code: ExitCode
    let message: String
    var description: String { message }
}

extension CommandFailure {
    /// A `--option S` that is not a positive number of seconds within `InputBounds.maxSeconds`.
    static func badSeconds(_ option: String) -> CommandFailure {
        CommandFailure(code: .usage,
                       message: "--\(option) needs a positive number of seconds, at most \(Int(InputBounds.maxSeconds))")
    }
}
