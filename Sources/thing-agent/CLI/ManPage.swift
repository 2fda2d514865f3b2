import ThingAgent

/// thing-agent(1) in roff (man's `-man` macros), made from the commands' own help: every command with its usage,
/// summary, options and notes, the options every command takes once, the environment, the exit codes and files.
enum ManPage {
    static func make(_ commands: [CommandSpec], common: [OptionSpec], version: String) -> String {
        let commonNames = Set(common.map(\.name))
        var page = """
            .TH THING-AGENT 1 "" "thing-agent \(version)" "User Commands"
            .SH NAME
            thing-agent \\- keep a fleet of IoT devices in view over MQTT
            .SH SYNOPSIS
            .B thing-agent
            .I command
            .RI [ options ]
            .br
            .B thing-agent
            .I command
            .B \\-\\-help
            .SH DESCRIPTION
            thing-agent subscribes to a fleet's device topics on an MQTT broker, keeps the latest of every device in a
            SQLite cache that answers at once (also right after a restart), tells listeners what changed, and sends
            devices requests tracked to one clear outcome. \\fBthing-agent run\\fR is the daemon; the other commands
            read its cache file or ask it over the broker.
            .SH COMMANDS

            """
        for command in commands {
            page += ".SS \"\(escape(command.name))\"\n\(text(command.summary))\n.PP\n.nf\n\(text(command.usage))\n.fi\n"
            for option in command.options where !commonNames.contains(option.name) {
                page += options([option])
            }
            if !command.discussion.isEmpty { page += ".PP\n.nf\n\(text(command.discussion))\n.fi\n" }
        }
        page += ".SH OPTIONS\nEvery command takes these.\n" + options(common)
        page += """
            .SH ENVIRONMENT
            Settings come from the config file (\\fB\\-\\-config\\fR or \\fBTHING_AGENT_CONFIG\\fR), then these
            variables, then flags. Each sets the config file's key of the same meaning.
            .PP
            .nf

            """
        for (key, variable) in AgentConfiguration.environmentVariables {
            page += text("\(variable)  \(key)") + "\n"
        }
        page += ".fi\n.SH EXIT STATUS\n.nf\n\(text(ExitCode.table))\n.fi\n"
        page += """
            .SH FILES
            .TP
            .I /etc/thing-agent/agent.json
            the packaged configuration (the unit runs \\fBthing-agent run \\-\\-config /etc/thing-agent/agent.json\\fR)
            .TP
            .I /var/lib/thing-agent/cache.sqlite
            the packaged cache file, with its journal and lock beside it
            .SH SEE ALSO
            .BR mosquitto (8),
            .BR mosquitto_ctrl (1),
            .BR systemctl (1);
            the documentation in /usr/share/doc/thing-agent

            """
        return page
    }

    private static func options(_ options: [OptionSpec]) -> String {
        options.map { option in
            let value = option.valueName.map { " \\fI\(escape($0))\\fR" } ?? ""
            return ".TP\n.B \\-\\-\(escape(option.name))\(value)\n\(text(option.help))\n"
        }.joined()
    }

    /// Text for roff: backslashes escaped, and a line that starts with a dot or quote kept from being a request.
    static func text(_ text: String) -> String {
        escape(text).split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : String(line)
        }.joined(separator: "\n")
    }

    /// Backslashes and minus signs as roff wants them, and every character beyond ASCII as a `\[uXXXX]` escape
    /// (groff reads its input as Latin-1 unless preconv ran first).
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case _ where scalar.isASCII: out.unicodeScalars.append(scalar)
            default:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        return out
    }
}
