import ThingAgent

extension Command {
    /// Starts an agent for a short-lived command, runs `body`, and always stops the agent, also when `body` throws.
    /// With `timers`, the agent's timers run meanwhile (a requester that follows a transfer ends it when it stalls).
    static func withAgent<Result: Sendable>(
        _ configuration: AgentConfiguration, role: Agent.Role, timers: Bool = false,
        _ body: (Agent) async throws -> Result
    ) async throws -> Result {
        let agent = try await startAgent(configuration, role: role)
        let running = timers ? Task { await agent.runTimers() } : nil
        let outcome: Swift.Result<Result, any Error>
        do {
            outcome = .success(try await body(agent))
        } catch {
            outcome = .failure(error)
        }
        running?.cancel()
        await agent.stop()
        return try outcome.get()
    }

    /// The value of a `--timeout S` option: nil when absent, a usage error when not a positive number.
    static func seconds(_ arguments: ParsedArguments, _ option: String = "timeout") throws -> Double? {
        guard let text = arguments.value(option) else { return nil }
        guard let seconds = InputBounds.seconds(text) else { throw CommandFailure.badSeconds(option) }
        return seconds
    }
}
