import JSON
import ThingAgent

/// The daemon's API as the CLI uses it: a thin layer over `AgentClient` that says what went wrong in the command's
/// words and exit codes. One call per `call`: connect, ask, wait, leave.
struct DaemonAPI {
    let configuration: AgentConfiguration
    /// The daemon's client id (its API lives under `thing-agent/api/<clientId>/`).
    let daemon: String

    /// What the daemon answered with a non-zero code.
    struct Refusal: Error {
        let code: Int
        let message: String
        /// The device request's error the daemon answered beside the code, when it gave one.
        var error: RequestError? = nil

        /// `ota`'s 409 for an offline device (its other 409 is an upgrade already in progress).
        var isDeviceOffline: Bool {
            if case .deviceOffline? = error { code == 409 } else { false }
        }
    }

    /// A client of the daemon. Its answers come under the user's own name, as the shipped ACL lets every user read
    /// thing-agent/replies/<user>/#.
    func client() throws -> AgentClient {
        do {
            return try AgentClient(configuration: configuration, daemon: daemon,
                                   replyUser: configuration.mqtt.username ?? "thing-agent-cli")
        } catch {
            throw CommandFailure(code: .failure, message: "\(error)")
        }
    }

    /// Sends `request` to `method` and returns the answer's `data`, or throws `Refusal` or a `CommandFailure`
    /// (no broker, no answer within `requestTimeout`).
    func call(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        try await call(method, request, timeout: configuration.requestTimeout)
    }

    /// A method that waits for a device (`ota` waits for the device to accept the upgrade): the daemon's own
    /// `requestTimeout` for the device, and some slack, so that the daemon's answer naming the silent device
    /// comes first rather than this command blaming the daemon.
    func callWaitingForDevice(_ method: String, _ request: JSONObject) async throws -> JSONValue {
        try await call(method, request, timeout: configuration.requestTimeout + AgentClient.answerSlack)
    }

    private func call(_ method: String, _ request: JSONObject, timeout: Duration) async throws -> JSONValue {
        let client = try client()
        do {
            try await client.connect()
        } catch {
            throw CommandFailure(code: .noBroker, message: """
                the daemon \(daemon) holds the cache \(configuration.cache.database), so the change goes through it, \
                but the broker \(configuration.mqtt.broker) cannot be used: \(error.reason)
                """)
        }
        do {
            let data = try await client.call(method, request, timeout: timeout)
            await client.disconnect()
            return data
        } catch {
            await client.disconnect()
            if case .refused(let code, let message, let error) = error {
                throw Refusal(code: code, message: message, error: error)
            }
            throw failure(error)
        }
    }

    /// A failure of the daemon's path in the command's words: 6 the broker, 5 no answer, 2 a bad request.
    func failure(_ error: AgentClientError) -> CommandFailure {
        switch error {
        case .brokerUnavailable(let reason):
            CommandFailure(code: .noBroker, message: "cannot reach the daemon \(daemon): \(reason)")
        case .noAnswer(_, let seconds):
            CommandFailure(code: .timeout, message: """
                the daemon \(daemon) holds the cache \(configuration.cache.database) but did not answer within \
                \(Format.seconds(seconds)) s
                """)
        case .refused(let code, let message, _):
            CommandFailure(code: code == 400 ? .usage : .failure, message: message)
        }
    }
}
