/// A small command-line parser shaped like swift-argument-parser's ideas: each command declares its options,
/// `--name value` and `--name=value` both work, unknown options are usage errors, and `--help` is everywhere.
struct OptionSpec: Sendable {
    let name: String
    /// nil for a flag that takes no value.
    let valueName: String?
    let help: String
    /// May be given more than once (values accumulate).
    var repeatable = false
}

struct CommandSpec: Sendable {
    let name: String
    let summary: String
    let usage: String
    let options: [OptionSpec]
    /// Extra help text after the options (exit codes, examples).
    var discussion = ""
    /// The words that may follow the command's name (`scene list`, `group create`): what shell completion offers.
    var actions: [String] = []
}

struct ParsedArguments: Sendable {
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var positionals: [String] = []

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ name: String) -> Bool { flags.contains(name) }
}

struct UsageError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

extension CommandSpec {
    func parse(_ arguments: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("--") || argument == "-" {
                if argument.hasPrefix("-"), argument.count > 1, !onlyPositionals, Int(argument) == nil {
                    throw UsageError(message: "unknown option '\(argument)'")
                }
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.name == name }) else {
                throw UsageError(message: "unknown option '--\(name)' for '\(self.name)'")
            }
            if option.valueName == nil {
                guard inline == nil else { throw UsageError(message: "--\(name) takes no value") }
                parsed.flags.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else {
                    throw UsageError(message: "--\(name) needs a value (\(option.valueName!))")
                }
                value = arguments[index]
                index += 1
            }
            if !option.repeatable, parsed.values[name] != nil {
                throw UsageError(message: "--\(name) given more than once")
            }
            parsed.values[name, default: []].append(value)
        }
        return parsed
    }

    var help: String {
        var text = "\(summary)\n\nUsage: \(usage)\n\nOptions:\n"
        let rows = options.map { option -> (String, String) in
            ("--\(option.name)" + (option.valueName.map { " \($0)" } ?? ""), option.help)
        }
        let width = min(28, (rows.map(\.0.count).max() ?? 0) + 2)
        for (left, right) in rows {
            let pad = left.count < width ? String(repeating: " ", count: width - left.count) : "\n" + String(repeating: " ", count: width + 2)
            text += "  \(left)\(pad)\(right)\n"
        }
        if !discussion.isEmpty { text += "\n\(discussion)\n" }
        return text
    }
}
