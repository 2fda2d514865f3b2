import ThingAgent

/// `thing-agent completion bash|zsh`: a completion script for the shell, made from the commands' own help.
enum CompletionCommand: Command {
    static let spec = CommandSpec(
        name: "completion",
        summary: "print a bash or zsh completion script (the package installs both)",
        usage: "thing-agent completion bash|zsh",
        options: [OptionSpec(name: "help", valueName: nil, help: "show this help")],
        discussion: """
            For this shell only:  . <(thing-agent completion bash)
            For zsh, save it as _thing-agent in a directory of $fpath.
            """,
        actions: ["bash", "zsh"])

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        try emit(arguments)
    }

    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode? {
        try emit(arguments)
    }

    private static func emit(_ arguments: ParsedArguments) throws -> ExitCode {
        let specs = CommandList.all.map { $0.spec }
        switch arguments.positionals {
        case ["bash"]: Console.out(escaped: ShellCompletion.bash(specs))
        case ["zsh"]: Console.out(escaped: ShellCompletion.zsh(specs))
        case []: throw CommandFailure(code: .usage, message: "name the shell: thing-agent completion bash|zsh")
        default:
            throw CommandFailure(code: .usage, message: "no completion for '\(arguments.positionals.joined(separator: " "))': bash or zsh")
        }
        return .success
    }
}

/// `thing-agent manpage`: thing-agent(1) in roff, made from the commands' own help.
enum ManPageCommand: Command {
    static let spec = CommandSpec(
        name: "manpage",
        summary: "print the man page, thing-agent(1), in roff (the package installs it)",
        usage: "thing-agent manpage",
        options: [OptionSpec(name: "help", valueName: nil, help: "show this help")],
        discussion: "Read it without installing it:  thing-agent manpage | man -l -")

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        try emit(arguments)
    }

    static func runLocally(_ arguments: ParsedArguments) throws -> ExitCode? {
        try emit(arguments)
    }

    private static func emit(_ arguments: ParsedArguments) throws -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw CommandFailure(code: .usage, message: "unexpected argument '\(arguments.positionals[0])'")
        }
        Console.out(escaped: ManPage.make(CommandList.all.map { $0.spec }, common: CommonOptions.options,
                                          version: ThingAgentVersion.current))
        return .success
    }
}
