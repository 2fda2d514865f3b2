import JSON
import ThingAgentCore

/// Scenes, links and gateway replacements on the agent (the library's side of `thing-agent scene`, `link`,
/// `transfer`, and of the API methods `scenes` and `links`).
extension Agent {
    /// Applies a change to the local tables (`LocalChange`): devices must be known, scenes and links are checked
    /// against the thing models. A change to the links takes effect at once in the daemon's link engine.
    @discardableResult
    public func apply(_ change: LocalChange) throws -> JSONValue {
        let local = try requireLocal()
        // A finished replacement moves the links in the engine at once, in the file only at the next flush: the
        // file is brought up to date first, so that the reload below does not bring back the faulty gateway.
        switch change {
        case .createLink, .deleteLink: try writer.flush()
        default: break
        }
        let answer = try local.apply(change, isKnown: { self.cache.device($0) != nil },
                                     model: { self.thingModel(for: $0) })
        switch change {
        case .createLink, .deleteLink: linkEngine.load(try local.links())
        case .edit(let device, _): homeAssistant?.mark(device)
        case .createScene, .updateScene, .deleteScene: homeAssistant?.scenesChanged()
        default: break
        }
        // In a group, the change goes to the standbys (the API waits until the broker has it: `replicated`).
        replicate(try records(for: change))
        return answer
    }

    /// The scene of that name kept in the cache file; nil when there is none.
    public func scene(named name: String) throws -> Scene? {
        try requireLocal().scene(named: name)
    }

    /// Creates a scene, its values checked against each device's thing model.
    @discardableResult
    public func createScene(_ scene: Scene) throws -> Scene {
        try apply(.createScene(scene))
        return scene
    }

    /// Replaces a scene that exists, checked as `createScene` is.
    @discardableResult
    public func updateScene(_ scene: Scene) throws -> Scene {
        try apply(.updateScene(scene))
        return scene
    }

    public func deleteScene(named name: String) throws {
        try apply(.deleteScene(name))
    }

    /// Runs the cached scene of that name (`SceneRunner`).
    public func runScene(named name: String, timeout: Duration? = nil, force: Bool = false) async throws -> SceneReport {
        guard let scene = try scene(named: name) else { throw EditError.unknownScene(name) }
        return await SceneRunner(agent: self).run(scene, timeout: timeout, force: force)
    }

    /// The multi-control links kept in the cache file.
    public func links() throws -> [DeviceLink] {
        try requireLocal().links()
    }

    /// Creates a link (`bind_multi_control_link`): its codes are checked for compatibility against the thing
    /// models; while the daemon runs it takes effect at once.
    @discardableResult
    public func createLink(_ link: DeviceLink) throws -> DeviceLink {
        try DeviceLink(json: try apply(.createLink(link)))
    }

    public func deleteLink(named name: String) throws {
        try apply(.deleteLink(name))
    }

    /// What the links did since the daemon started.
    public var linkStatistics: LinkStatistics { linkEngine.statistics }

    /// The recorded gateway replacements, latest first, with what each moved; those of one gateway (old or new)
    /// when `gateway` is given.
    public func replacements(involving gateway: String? = nil) throws -> [GatewayReplacement] {
        try requireLocal().replacements(involving: gateway)
    }
}
