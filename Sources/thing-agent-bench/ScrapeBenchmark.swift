import Foundation
import MQTT
import Synchronization
import ThingAgent

/// What a metrics scrape costs the receive path: the receive path's time per message alone, then while another
/// thread renders the metrics every 10 ms (150 times Prometheus' usual pace), then without pause (a worst case that
/// also takes a core from the receive path), alternating so that a busy machine hurts all alike; the best of each
/// is kept.
struct ScrapeBenchmark {
    let directory: String

    struct Result {
        var alone: Double
        var everyTenMilliseconds: Double
        var scraped: Double
        var scrapeMicroseconds: Double
    }

    func run(_ messages: [(topic: String, payload: [UInt8])], rounds: Int = 3) async throws -> Result {
        var alone: [Double] = [], paced: [Double] = [], scraped: [Double] = [], perScrape: [Double] = []
        for _ in 0..<rounds {
            alone.append(try await receive(messages, scraping: nil).microsPerMessage)
            paced.append(try await receive(messages, scraping: .milliseconds(10)).microsPerMessage)
            let run = try await receive(messages, scraping: .zero)
            scraped.append(run.microsPerMessage)
            perScrape.append(run.microsPerScrape)
        }
        return Result(alone: alone.min() ?? .nan, everyTenMilliseconds: paced.min() ?? .nan,
                      scraped: scraped.min() ?? .nan, scrapeMicroseconds: perScrape.min() ?? .nan)
    }

    /// `scraping`: the pause between renders; nil renders nothing.
    private func receive(_ messages: [(topic: String, payload: [UInt8])], scraping: Duration?) async throws
        -> (microsPerMessage: Double, microsPerScrape: Double)
    {
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/scrape-\(UInt32.random(in: 0...UInt32.max)).sqlite"
        let agent = try Agent(configuration: configuration, role: .daemon)
        let token = agent.events.addListener { _ in }
        let prepared = messages.map { MQTTMessage(topic: $0.topic, payload: $0.payload, qos: .atLeastOnce, retain: false) }
        let scraper = Scraper(agent: agent)
        if let scraping { scraper.start(pause: scraping) }
        let seconds = await Measure.seconds {
            for message in prepared { agent.receive(message) }
        }
        let (scrapes, scrapeSeconds) = scraper.stop()
        token.cancel()
        await agent.stop()
        return (seconds / Double(messages.count) * 1e6, scrapes > 0 ? scrapeSeconds / Double(scrapes) * 1e6 : .nan)
    }
}

/// A thread that renders the metrics over and over until stopped.
private final class Scraper: Sendable {
    let agent: Agent
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)
    private let result = Mutex<(Int, Double)>((0, 0))

    init(agent: Agent) { self.agent = agent }

    func start(pause: Duration) {
        started.store(true, ordering: .relaxed)
        let micros = UInt32(pause.components.seconds * 1_000_000 + pause.components.attoseconds / 1_000_000_000_000)
        let thread = Thread { [self] in
            var count = 0
            let clock = ContinuousClock()
            let begin = clock.now
            while !stopping.load(ordering: .relaxed) {
                _ = agent.metricsText()
                count += 1
                if micros > 0 { usleep(micros) }
            }
            let elapsed = clock.now - begin
            result.withLock { $0 = (count, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) }
            done.signal()
        }
        thread.start()
    }

    func stop() -> (scrapes: Int, seconds: Double) {
        guard started.load(ordering: .relaxed) else { return (0, 0) }
        stopping.store(true, ordering: .relaxed)
        done.wait()
        return result.withLock { $0 }
    }
}
