/// Shell completion scripts made from the commands' own specs: the command names, each command's options and the
/// words that may follow its name, and file names where an option takes a FILE, DIR or PATH.
enum ShellCompletion {
    /// Options whose value is a file or directory name.
    static func takesPath(_ option: OptionSpec) -> Bool {
        guard let value = option.valueName else { return false }
        return ["FILE", "DIR", "PATH"].contains { value.contains($0) }
    }

    static func bash(_ commands: [CommandSpec]) -> String {
        var cases = ""
        for command in commands {
            let options = command.options.map { "--" + $0.name }
            let paths = command.options.filter(takesPath).map { "--" + $0.name }
            let valued = command.options.filter { $0.valueName != nil && !takesPath($0) }.map { "--" + $0.name }
            cases += """
                      \(command.name))
                        options="\(options.joined(separator: " "))"
                        paths="\(paths.joined(separator: " "))"
                        valued="\(valued.joined(separator: " "))"
                        actions="\(command.actions.joined(separator: " "))" ;;

                """
        }
        return """
            # bash completion for thing-agent, made by `thing-agent completion bash` from the commands' own help.
            _thing_agent() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                if [ "$COMP_CWORD" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "\(commands.map(\.name).joined(separator: " ")) help --help --version" -- "$cur"))
                    return
                fi
                local options="" paths="" valued="" actions=""
                case ${COMP_WORDS[1]} in
            \(cases)        help)
                        actions="\(commands.map(\.name).joined(separator: " "))" ;;
                esac
                case " $paths " in *" $prev "*) COMPREPLY=($(compgen -f -- "$cur")); return ;; esac
                case " $valued " in *" $prev "*) return ;; esac
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "$options" -- "$cur"))
                elif [ "$COMP_CWORD" -eq 2 ] && [ -n "$actions" ]; then
                    COMPREPLY=($(compgen -W "$actions" -- "$cur"))
                fi
            }
            complete -o default -F _thing_agent thing-agent

            """
    }

    static func zsh(_ commands: [CommandSpec]) -> String {
        /// Text inside a single-quoted zsh word, where `_arguments` also reads `[`, `]` and `:`.
        func quoted(_ text: String) -> String {
            text.replacing("\\", with: "\\\\")
                .replacing("[", with: "\\[").replacing("]", with: "\\]")
                .replacing(":", with: "\\:").replacing("'", with: "'\\''")
        }
        let names = commands.map { "'\($0.name):\(quoted($0.summary))'" }.joined(separator: "\n        ")
        var cases = ""
        for command in commands {
            var specs = command.options.map { option -> String in
                let head = "'--\(option.name)[\(quoted(option.help))]"
                guard let value = option.valueName else { return head + "'" }
                return head + ":\(quoted(value)):" + (takesPath(option) ? "_files'" : "'")
            }
            if !command.actions.isEmpty { specs.append("'1:action:(\(command.actions.joined(separator: " ")))'") }
            specs.append("'*::argument:_default'")
            cases += "    \(command.name))\n        _arguments -s \\\n            "
                + specs.joined(separator: " \\\n            ") + " ;;\n"
        }
        return """
            #compdef thing-agent
            # zsh completion for thing-agent, made by `thing-agent completion zsh` from the commands' own help.
            _thing-agent() {
                local -a commands
                commands=(
                    \(names)
                )
                if (( CURRENT == 2 )); then
                    _describe -t commands 'thing-agent command' commands
                    return
                fi
                local command=$words[2]
                shift words
                (( CURRENT-- ))
                case $command in
            \(cases)    esac
            }
            _thing-agent "$@"

            """
    }
}
