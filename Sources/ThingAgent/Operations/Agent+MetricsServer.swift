import HTTPEndpoint
import JSON

extension Agent {
    /// Serves `GET /metrics` and `GET /health` on `metricsAddress` (the daemon only); nil when none is set.
    func startMetricsServer() throws -> HTTPServer? {
        guard role == .service, let text = configuration.metricsAddress else { return nil }
        guard let address = MetricsAddress(text) else {
            throw HTTPServerError(message: "metricsAddress '\(text)' is not HOST:PORT")
        }
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
