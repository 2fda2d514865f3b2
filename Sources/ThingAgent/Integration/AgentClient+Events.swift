import JSON
import MQTT
import ThingAgentCore

extension AgentClient {
    /// One device's events as the daemon publishes them on its event feed (`eventsTopic`, on by default): the
    /// same `DeviceEvent`s a listener of a local agent gets, from the moment this returns until the consuming task
    /// is cancelled or the client disconnects. Only the kinds asked for are subscribed. Events the daemon's feed
    /// dropped (its queue full) or published while this client was away are not replayed.
    public func events(device: String, kinds: DeviceEventKinds = .all) async throws(AgentClientError)
        -> AsyncStream<DeviceEvent> {
        guard DeviceID.isValid(device) else {
            throw .refused(code: 400, message: "invalid device id '\(device)'", error: nil)
        }
        let topics = EventPublisher.kindNames.filter { kinds.contains($0.kind) }
            .map { "\(configuration.events.topic)/\(device)/\($0.name)" }
        return try await follow(topics) { message in
            (try? JSONParser.parse(message.payload)).flatMap { DeviceEvent(feed: $0) }
        }
    }
}
