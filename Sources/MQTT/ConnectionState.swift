/// Where the client is in its life. `stopped` is final.
public enum MQTTConnectionState: Sendable, Equatable {
    /// Created, or the last `connect()` failed; `connect()` may be called (again).
    case idle
    /// The first connection attempt is in progress.
    case connecting
    /// CONNACK received and every remembered subscription is in place.
    case connected
    /// The connection was lost; the client retries with backoff. `reason` says why it was lost or why the last retry failed.
    case reconnecting(reason: String)
    /// `disconnect()` was called, or the broker refused the credentials on a reconnect.
    case stopped
}
