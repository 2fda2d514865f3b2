import Foundation
import MQTT
import ThingAgent

/// Home Assistant's discovery after a start (docs/home-assistant.md, "Scale"): a cache of `devices` lights, a
/// backlog of reports queued for the agent's persistent session, then `run()` with `homeAssistant` on (every device's
/// config, state and availability to publish, paced) and, for comparison, off. Figures: the time until the first
/// pass over the fleet is published, and the backlog's drain rate with the discovery running against without.
struct HomeAssistantBenchmark {
    let broker: BenchBroker
    let directory: String

    struct Figures {
        var discoverySeconds: Double
        var messages: Int
        var drainOn: Double
        var drainOff: Double
        var drainOnSeconds: Double
    }

    func run(devices: Int, backlog: Int) async throws -> Figures {
        let cache = directory + "/ha-fleet.sqlite"
        try await makeCache(devices: devices, at: cache)
        let reports = propertyReports(count: backlog, devices: min(devices, 1000))
        let off = try await drain(cache: cache, reports: reports, homeAssistant: false)
        let on = try await drain(cache: cache, reports: reports, homeAssistant: true)
        return Figures(discoverySeconds: on.discovery ?? .nan, messages: on.published,
                       drainOn: Double(backlog) / on.drain, drainOff: Double(backlog) / off.drain, drainOnSeconds: on.drain)
    }

    private func drain(cache: String, reports: [(topic: String, payload: [UInt8])], homeAssistant: Bool) async throws
        -> (drain: Double, discovery: Double?, published: Int) {
        let database = directory + "/ha-\(homeAssistant ? "on" : "off")-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        try FileManager.default.copyItem(atPath: cache, toPath: database)
        var configuration = AgentConfiguration()
        configuration.events.publish = false
        configuration.api.enabled = false
        configuration.mqtt.broker = broker.url
        configuration.cache.database = database
        configuration.mqtt.clientID = "bench-ha-\(UInt32.random(in: 0...UInt32.max))"
        configuration.homeAssistant.enabled = homeAssistant
        configuration.homeAssistant.topic = "bench/ha/\(UInt32.random(in: 0...UInt32.max))"
        configuration.homeAssistant.discoveryPrefix = "bench-homeassistant-\(UInt32.random(in: 0...UInt32.max))"
        if FileManager.default.fileExists(atPath: "Config/models") { configuration.modelsDirectory = "Config/models" }
        // Make the persistent session, then stop: the backlog is queued for it.
        let first = try Agent(configuration: configuration)
        try await first.start()
        await first.stop()
        try await Publisher(url: broker.url).publish(reports, qos: .atLeastOnce)

        let agent = try Agent(configuration: configuration)
        let started = ContinuousClock.now
        let work = Task { try await agent.run() }
        var drained: Duration?
        var discovered: Duration?
        while drained == nil || (homeAssistant && discovered == nil) {
            if drained == nil, agent.statistics.received >= reports.count { drained = ContinuousClock.now - started }
            if homeAssistant, discovered == nil, agent.homeAssistantProgress?.initialPassDone == true {
                discovered = ContinuousClock.now - started
            }
            if ContinuousClock.now - started > .seconds(600) { throw BenchError("no end in 600 s") }
            try await Task.sleep(for: .milliseconds(2))
        }
        let published = agent.homeAssistantProgress?.published ?? 0
        work.cancel()
        _ = try? await work.value
        return (drained!.seconds, discovered?.seconds, published)
    }
}
