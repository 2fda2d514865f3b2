import HTTPEndpoint
import JSON
import ThingAgentCore

extension Agent {
    /// Serves `GET /metrics` and `GET /health` on `metricsAddress` (the daemon only); nil when none is set.
    func startMetricsServer() throws(MetricsServerError) -> HTTPServer? {
        guard role.writesCache, let text = configuration.metricsAddress else { return nil }
        guard let address = MetricsAddress(text) else {
            throw MetricsServerError(message: "metricsAddress '\(text)' is not HOST:PORT", restartCannotFix: true)
        }
        do {
            return try serveMetrics(on: address)
        } catch {
            throw MetricsServerError(message: "cannot serve metrics and health on metricsAddress '\(text)': \(error)",
                                     restartCannotFix: (error as? HTTPServerError)?.libraryMissing ?? false)
        }
    }

    private func serveMetrics(on address: MetricsAddress) throws -> HTTPServer {
        let server = try HTTPServer(host: address.host, port: address.port, address: "\(address)", routes: [
            "/metrics": { [self] in
                HTTPServer.Response(status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                    body: Array(metricsText().utf8))
            },
            "/health": { [self] in
                let report = health()
                return HTTPServer.Response(status: report.healthy ? 200 : 503, contentType: "application/json",
                                           body: JSONValue.object(report.json).serializedBytes() + [0x0A])
            },
        ])
        logger.info("serving metrics and health", metadata: ["address": "http://\(address)/metrics"])
        return server
    }
}

/// The metrics address cannot be served (taken, not local, not resolvable, libmicrohttpd missing): the daemon
/// stops before it connects.
public struct MetricsServerError: Error, CustomStringConvertible {
    public let message: String
    /// A malformed address or a missing library: `run` exits 2, which the systemd unit does not restart.
    public let restartCannotFix: Bool
    public var description: String { message }
}
