/// A stop asked for while the agent was still starting (loading its cache, replaying its journal): nothing was
/// written, so the next start does it all again.
public struct StartUpInterrupted: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "stopped during start-up" }
}
