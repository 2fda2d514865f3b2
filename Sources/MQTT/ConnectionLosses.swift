internal import CLazyLibraries

/// What a lost connection means, and where the reconnect backoff resumes. A pure value, checked in tests.
///
/// Two clients with the same client id take the connection from each other: the broker closes the older one as
/// soon as the other connects. Resetting the backoff after every successful connect would make them fight several
/// times a second, so such a loss keeps the backoff where it was. An MQTT 5 broker may say so (DISCONNECT reason
/// 0x8E); mosquitto 2.0 does not, it closes the connection as 3.1.1 brokers do. So `quickLossesBeforeReport`
/// losses in a row also count as that, each of a
/// connection that did not last (less than `stableConnection`, and at least twice the longest reconnect pause, which
/// is how long the other client can stay away) although the broker was up all along (the reconnect before it worked
/// at the first try). A broker that restarts is down for a moment, so its clients' reconnects usually take more
/// than one try: that is not taken for a second client, and every other loss resets the backoff as before.
package struct ConnectionLosses: Sendable {
    package static let sessionTakenOver: Int32 = 0x8E

    package let stableConnection: Duration
    package let quickLossesBeforeReport: Int
    /// The backoff attempt the next reconnect starts from.
    package private(set) var backoffAttempt = 0
    /// Losses in a row that look like another client with the same id.
    package private(set) var quickLosses = 0
    private var connectedAt: ContinuousClock.Instant
    /// Whether the reconnect that made the current connection worked at its first try (the first connect counts).
    private var reconnectedAtOnce = true

    package init(configuration: MQTTConfiguration, connectedAt: ContinuousClock.Instant = .now) {
        stableConnection = max(configuration.stableConnection, configuration.reconnectMaxDelay * 2)
        quickLossesBeforeReport = max(configuration.quickLossesBeforeTakeoverReport, 1)
        self.connectedAt = connectedAt
    }

    /// The error to report for a loss: `error` as libmosquitto gave it, unless the broker said why (MQTT 5 DISCONNECT
    /// `serverReason`) or the pattern of losses says another client uses the same client id.
    package mutating func connectionLost(error: MQTTError, serverReason: Int32?, clientID: String,
                                         at now: ContinuousClock.Instant = .now) -> MQTTError {
        let quick = now - connectedAt < stableConnection && reconnectedAtOnce
        let saidSo = serverReason == Self.sessionTakenOver
        if saidSo || quick {
            quickLosses += 1
        } else {
            quickLosses = 0
        }
        let suspected = serverReason == nil && quickLosses >= quickLossesBeforeReport
        if !saidSo && !suspected { backoffAttempt = 0 }
        func said(_ kind: MQTTError.Kind, _ code: Int32, _ message: String) -> MQTTError {
            MQTTError(kind: kind, code: code, message: message, context: error.context)
        }
        if saidSo {
            return said(.clientIDInUse, Self.sessionTakenOver,
                        "another client connected with client id \"\(clientID)\" and the broker closed this "
                            + "connection (MQTT 5 reason 0x8E, session taken over); each client needs its own id")
        }
        if let serverReason {
            return said(.notConnected, serverReason,
                        "the broker closed the connection: \(libraryText(libmosquitto.mosquitto_reason_string(serverReason)))")
        }
        if suspected {
            return said(.clientIDInUse, error.code,
                        "the broker closed the connection \(quickLosses) times in a row right after accepting it; "
                            + "another client probably uses client id \"\(clientID)\" (each client needs its own)")
        }
        return error
    }

    /// A reconnect succeeded after `tries` connection attempts; the backoff stood at `attempt`.
    package mutating func reconnected(tries: Int, attempt: Int, at now: ContinuousClock.Instant = .now) {
        connectedAt = now
        reconnectedAtOnce = tries <= 1
        backoffAttempt = attempt
    }
}
