/// The one place the version is written: `thing-agent --version`, the package (`scripts/package` reads this line)
/// and the `thing_agent_build_info` metric all take it from here.
public enum ThingAgentVersion {
    public static let current = "0.9.0"
}
