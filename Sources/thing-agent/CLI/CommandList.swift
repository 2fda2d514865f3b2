/// The subcommands, in the order `--help` lists them (and the completions and the man page).
enum CommandList {
    static let all: [any Command.Type] = [
        RunCommand.self, InfoCommand.self, DevicesCommand.self, WatchCommand.self, SetCommand.self, ActionCommand.self, SceneCommand.self,
        GatewaysCommand.self, TransferCommand.self, FirmwareCommand.self, OTACommand.self, WifiScanCommand.self,
        SimulateCommand.self,
        DetailCommand.self, EditCommand.self, RemoveCommand.self, GroupCommand.self, LinkCommand.self,
        NetworkCommand.self,
        PairCommand.self,
        StatsCommand.self, StatusCommand.self,
        CompletionCommand.self, ManPageCommand.self,
        VersionCommand.self,
    ]
}
