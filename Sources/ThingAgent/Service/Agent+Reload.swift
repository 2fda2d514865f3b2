import FoundationEssentials
import Synchronization
import ThingAgentCore

/// The files an agent reads at start that can change under a running daemon (SIGHUP reloads them).
struct ReloadableSettings: Sendable {
    var models: ThingModels
    var detailConfig: DetailConfig
    /// The daemon's scenes (`scenesFile`); CLI commands read the file themselves and leave this empty.
    var scenes: Scenes
    var catalog: FirmwareCatalog

    init(_ configuration: AgentConfiguration, role: Agent.Role) throws {
        models = try configuration.modelsDirectory.map { try ThingModels(directory: $0) } ?? ThingModels()
        detailConfig = try configuration.detailConfig.map { try DetailConfig(file: $0) } ?? .standard
        catalog = try configuration.firmwareCatalog.map { try FirmwareCatalog(file: $0) } ?? FirmwareCatalog()
        scenes = try role.writesCache ? configuration.scenesFile.map { try Scenes(file: $0) } ?? Scenes([]) : Scenes([])
    }
}

/// What a reload did, for the log line that says so.
public struct ReloadReport: Sendable {
    /// One entry per thing reloaded (`thing models: 4 products`), in the order they were read.
    public var reloaded: [String] = []
    /// One entry per thing kept as it was, with the reason (`scenes /etc/...: not valid JSON`).
    public var kept: [String] = []
}

extension Agent {
    /// The scenes kept in the cache file (those of `scenesFile` are imported into it at start and at `reload()`);
    /// without a cache file, those of `scenesFile` as the daemon last read them.
    public var scenes: Scenes {
        if let local, let cached = try? local.scenes() { return Scenes(cached) }
        return reloadable.withLock { $0.scenes }
    }

    /// Imports the scenes file as last read into the cache's scenes (`LocalStore.importScenes`: never silently
    /// overwriting a scene changed in the cache), and says what it did. A scene whose values a known device's
    /// thing model refuses is left out (and said so); fixed in the file, it is imported at the next reload.
    @discardableResult
    static func importScenes(_ scenes: Scenes, from file: String?, into local: LocalStore, logger: AgentLogger,
                             model: (String) -> ThingModel?) throws -> SceneImport {
        guard let file else { return SceneImport() }
        var valid: [Scene] = []
        for scene in scenes.all {
            do {
                try scene.check(model: model)
                valid.append(scene)
            } catch {
                logger.warning("left a scene of the scenes file out: \(error)", metadata: ["file": file])
            }
        }
        let report = try local.importScenes(Scenes(valid), from: file)
        if !report.imported.isEmpty || !report.updated.isEmpty {
            logger.info("imported scenes from the scenes file", metadata: [
                "file": file, "new": report.imported.joined(separator: ","),
                "updated": report.updated.joined(separator: ",")])
        }
        if !report.deleted.isEmpty {
            logger.warning("the scenes file changed scenes that were deleted in the cache since they were imported; "
                           + "they stay deleted (scene create brings one back)",
                           metadata: ["file": file, "scenes": report.deleted.joined(separator: ",")])
        }
        let changed = report.kept.filter { !report.deleted.contains($0) }
        if !changed.isEmpty {
            logger.warning("the scenes file changed scenes that were changed in the cache since they were "
                           + "imported; the cache's versions stay (scene update or delete changes them)",
                           metadata: ["file": file, "scenes": changed.joined(separator: ",")])
        }
        return report
    }

    /// The firmware catalog (`firmwareCatalog`) as last read (at start or at `reload()`); empty without one.
    public var firmwareCatalog: FirmwareCatalog { reloadable.withLock { $0.catalog } }

    /// Re-reads the thing models, the detail layout, the scenes file and the firmware catalog named by `configuration` (the daemon's
    /// config as it reads it now). Each part is replaced only when it reads cleanly; a broken file keeps the old
    /// part and says why. Broker, cache and topic settings need a restart and are not touched.
    public func reload(_ configuration: AgentConfiguration) -> ReloadReport {
        var report = ReloadReport()
        var next = reloadable.withLock { $0 }
        do {
            next.models = try configuration.modelsDirectory.map { try ThingModels(directory: $0) } ?? ThingModels()
            report.reloaded.append("thing models (\(next.models.byProduct.count) products)")
        } catch {
            report.kept.append("thing models: \(error)")
        }
        do {
            next.detailConfig = try configuration.detailConfig.map { try DetailConfig(file: $0) } ?? .standard
            report.reloaded.append("detail config (\(configuration.detailConfig ?? "built in"))")
        } catch {
            report.kept.append("detail config: \(error)")
        }
        do {
            next.scenes = try configuration.scenesFile.map { try Scenes(file: $0) } ?? Scenes([])
            if role.writesCache, let local, let file = configuration.scenesFile {
                let imported = try Self.importScenes(next.scenes, from: file, into: local, logger: logger) { device in
                    next.models.model(for: self.cache.device(device)?.info.productId)
                }
                report.reloaded.append("scenes (\(next.scenes.all.count) from \(file)), imported: "
                                       + "\(imported.imported.count) new, \(imported.updated.count) updated, "
                                       + "\(imported.kept.count) kept as cached"
                                       + (imported.deleted.isEmpty ? "" : " (deleted: \(imported.deleted.joined(separator: ",")))"))
            } else {
                report.reloaded.append("scenes (\(next.scenes.all.count) from \(configuration.scenesFile ?? "no file"))")
            }
        } catch {
            report.kept.append("scenes: \(error)")
        }
        do {
            next.catalog = try configuration.firmwareCatalog.map { try FirmwareCatalog(file: $0) } ?? FirmwareCatalog()
            report.reloaded.append("firmware catalog (\(next.catalog.byProduct.count) products from "
                                   + "\(configuration.firmwareCatalog ?? "no file"))")
        } catch {
            report.kept.append("firmware catalog: \(error)")
        }
        reloadable.withLock { $0 = next }
        currentModels.use(next.models)
        // Models, catalog and scenes shape what Home Assistant is given: every device is looked at again (only
        // what changed is published).
        if self.configuration.homeAssistant.enabled { homeAssistant?.markAll(cache.all().map(\.id), force: false) }
        return report
    }
}
