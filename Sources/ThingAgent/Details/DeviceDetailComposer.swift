import JSON
import Synchronization
import ThingAgentCore

/// One item of a composed detail page.
public struct DetailItem: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// Served: `data` holds the cell's content.
        case ok
        /// A cell only the phone app can serve (`add_icon_to_home_screen`, `help_and_feedback`,
        /// `bind_multi_control_link`): kept, marked, never dropped silently.
        case notAvailableHere
        /// The cell does not apply to this device (sub-devices of a device that is not a gateway).
        case notApplicable
        /// No built-in cell and no registered provider of this type.
        case unknownCellType
        /// The cell could not be served now (no broker, device offline, a provider timed out); `message` says why.
        case failed
    }

    public var cellType: String
    public var status: Status
    public var data: JSONValue?
    public var message: String?
    public var options: JSONObject

    public var json: JSONObject {
        var object = JSONObject([("cellType", .string(cellType)), ("status", .string(status.rawValue))])
        if let data { object["data"] = data }
        if let message { object["message"] = .string(message) }
        if !options.isEmpty { object["options"] = .object(options) }
        return object
    }
}

public struct DetailSection: Sendable, Equatable {
    public var name: String
    /// The section header's cell type and title (`section_off_line_warn` → "Offline notification").
    public var header: JSONObject?
    public var margin: JSONObject?
    public var items: [DetailItem]

    public var json: JSONObject {
        JSONObject([
            ("name", .string(name)), ("header", header.map(JSONValue.object) ?? .null),
            ("margin", margin.map(JSONValue.object) ?? .null), ("items", .array(items.map { .object($0.json) })),
        ])
    }
}

/// A device's detail page, sections in config order.
public struct DeviceDetail: Sendable, Equatable {
    public var deviceId: String
    public var sections: [DetailSection]

    public var json: JSONObject {
        JSONObject([("device", .string(deviceId)), ("sections", .array(sections.map { .object($0.json) }))])
    }

    /// The item of a cell type, wherever it is.
    public func item(_ cellType: String) -> DetailItem? {
        sections.lazy.flatMap(\.items).first { $0.cellType == cellType }
    }
}

/// What a custom cell provider gets.
public struct DetailContext: Sendable {
    public let deviceId: String
    public let device: DeviceSnapshot?
    public let metadata: DeviceMetadata
    /// The item's keys from the config, besides `cellType`.
    public let options: JSONObject
    public let agent: Agent
}

/// An action on an item (a click): `footer`/`remove`, `off_line_warn`/`set` with a bool, `header`/`rename` with a
/// string are done by the composer itself; every action then goes to the click handler.
public struct DetailAction: Sendable, Equatable {
    public var deviceId: String
    public var cellType: String
    public var action: String
    public var value: JSONValue?

    public init(deviceId: String, cellType: String, action: String, value: JSONValue? = nil) {
        self.deviceId = deviceId
        self.cellType = cellType
        self.action = action
        self.value = value
    }
}

/// Composes device-detail pages from a `DetailConfig`: built-in cell types served from the cache, the local store
/// and live round trips; custom cell types from registered providers.
public final class DeviceDetailComposer: Sendable {
    public typealias Provider = @Sendable (DetailContext) -> JSONValue?
    public typealias AsyncProvider = @Sendable (DetailContext) async -> JSONValue?

    private enum Registered: Sendable {
        case sync(Provider)
        case async(AsyncProvider, timeout: Duration)
    }

    public let agent: Agent
    public let config: DetailConfig
    private let networkTimeout: Duration?
    private let providers = Mutex<[String: Registered]>([:])
    private let clickHandler = Mutex<(@Sendable (DetailAction) async -> Void)?>(nil)

    /// Cell types only a phone can serve.
    public static let phoneOnly: Set<String> = ["add_icon_to_home_screen", "help_and_feedback", "bind_multi_control_link"]
    /// Cell types served here.
    public static let builtIn: Set<String> = [
        "header", "device_info", "net_setting", "off_line_warn", "group_edit_devices", "group_create",
        "check_device_network", "check_firmware_update", "show_infrared_gateway_sub_device", "footer",
    ]
    static let sectionTitles = ["section_off_line_warn": "Offline notification", "section_other": "Other"]

    public convenience init(agent: Agent, config: DetailConfig = .standard) {
        self.init(agent: agent, config: config, networkTimeout: nil)
    }

    /// `networkTimeout`: how long check_device_network waits for its answer (nil: `requestTimeout`), for an API
    /// request that names its own.
    package init(agent: Agent, config: DetailConfig, networkTimeout: Duration?) {
        self.networkTimeout = networkTimeout
        self.agent = agent
        self.config = config
    }

    /// Serves `cellType` with a synchronous provider (also replacing a built-in one). A nil result hides the item.
    public func register(_ cellType: String, provider: @escaping Provider) {
        providers.withLock { $0[cellType] = .sync(provider) }
    }

    /// Serves `cellType` with an asynchronous provider; one that takes longer than `timeout` ends the item as
    /// `failed`. A nil result hides the item.
    public func registerAsync(_ cellType: String, timeout: Duration = .seconds(2), provider: @escaping AsyncProvider) {
        providers.withLock { $0[cellType] = .async(provider, timeout: timeout) }
    }

    /// Removes every registered provider (the SDKs' `clearInsertItem`): their cell types are unknown again.
    public func clearInsertItem() {
        providers.withLock { $0.removeAll() }
    }

    /// Receives every item action (after the built-in ones are done).
    public func onClick(_ handler: @escaping @Sendable (DetailAction) async -> Void) {
        clickHandler.withLock { $0 = handler }
    }

    /// Performs an item action: the built-in ones (remove, offline-warning switch, rename), then the click handler.
    public func click(_ action: DetailAction) async throws {
        switch (action.cellType, action.action) {
        case ("footer", "remove"):
            try await agent.removeDevice(action.deviceId)
        case ("off_line_warn", "set"), ("off_line_warn", "toggle"):
            let current = try agent.metadata(action.deviceId).offlineWarning
            try agent.edit(action.deviceId, DeviceEdit(offlineWarning: action.value?.boolValue ?? !current))
        case ("header", "rename"):
            guard let name = action.value?.stringValue else { throw EditError.invalid("rename needs a string value") }
            try agent.rename(action.deviceId, to: name)
        default:
            break
        }
        let handler = clickHandler.withLock { $0 }
        await handler?(action)
    }

    /// The page for one device, sections and items in config order. Items are served one after another (the
    /// live network check included), so the page costs at most one round trip plus the providers' time.
    public func compose(_ deviceId: String) async -> DeviceDetail {
        let device = agent.cache.device(deviceId)
        let metadata = (try? agent.local?.metadata(deviceId)) ?? DeviceMetadata()
        var sections: [DetailSection] = []
        for section in config.sections {
            var items: [DetailItem] = []
            for item in section.items {
                let context = DetailContext(deviceId: deviceId, device: device, metadata: metadata,
                                            options: item.options, agent: agent)
                if let served = await serve(item, context) { items.append(served) }
            }
            let header = section.header.map { header -> JSONObject in
                var object = JSONObject([("cellType", .string(header.cellType))])
                object["title"] = Self.sectionTitles[header.cellType].map(JSONValue.string) ?? .null
                for (key, value) in header.options { object[key] = value }
                return object
            }
            sections.append(DetailSection(name: section.name, header: header, margin: section.margin, items: items))
        }
        return DeviceDetail(deviceId: deviceId, sections: sections)
    }

    /// nil hides the item (a custom provider returned nil).
    private func serve(_ item: DetailConfig.Item, _ context: DetailContext) async -> DetailItem? {
        func make(_ status: DetailItem.Status, _ data: JSONValue? = nil, _ message: String? = nil) -> DetailItem {
            DetailItem(cellType: item.cellType, status: status, data: data, message: message, options: item.options)
        }
        switch providers.withLock({ $0[item.cellType] }) {
        case .sync(let provider)?:
            return provider(context).map { make(.ok, $0) }
        case .async(let provider, let timeout)?:
            switch await Self.withTimeout(timeout, { await provider(context) }) {
            case .some(.some(let value)): return make(.ok, value)
            case .some(.none): return nil
            case .none: return make(.failed, nil, "the provider gave no answer within \(timeout)")
            }
        case nil:
            break
        }
        if Self.phoneOnly.contains(item.cellType) {
            return make(.notAvailableHere, nil, "only the phone app can serve this cell")
        }
        guard Self.builtIn.contains(item.cellType) else {
            return make(.unknownCellType, nil, "no built-in cell and no registered provider for '\(item.cellType)'")
        }
        guard let device = context.device else { return make(.failed, nil, "unknown device '\(context.deviceId)'") }
        return await builtIn(item, device, context, make)
    }

    private func builtIn(_ item: DetailConfig.Item, _ device: DeviceSnapshot, _ context: DetailContext,
                         _ make: (DetailItem.Status, JSONValue?, String?) -> DetailItem) async -> DetailItem {
        let local = agent.local
        switch item.cellType {
        case "header":
            return make(.ok, .object(JSONObject([
                ("name", device.displayName(context.metadata).map(JSONValue.string) ?? .null),
                ("reportedName", device.info.name.map(JSONValue.string) ?? .null),
                ("icon", context.metadata.icon.map(JSONValue.string) ?? .null),
                ("room", context.metadata.room.map(JSONValue.string) ?? .null),
                ("online", device.online.map(JSONValue.bool) ?? .null),
            ])), nil)
        case "device_info":
            return make(.ok, .object(device.info.json), nil)
        case "net_setting":
            let networks = (try? local?.backupNetworks(device.id)) ?? []
            return make(.ok, .object(JSONObject([
                ("backupNetworks", .array(networks.map { network in
                    .object(JSONObject([("ssid", .string(network.ssid)), ("priority", .integer(Int64(network.priority))),
                                        ("hasPassword", .bool(network.password != nil))]))
                })),
                ("wifiSignal", device.wifiSignal.map { .integer(Int64($0.dBm)) } ?? .null),
                ("netStrength", device.info["netStrength"] ?? .null),
                ("wifiScan", .bool(device.info.supports(.wifiList))),
            ])), nil)
        case "off_line_warn":
            let status = device.online.map { $0 ? "online" : "offline" } ?? "unknown"
            return make(.ok, .object(JSONObject([
                ("enabled", .bool(context.metadata.offlineWarning)), ("status", .string(status)),
                ("offlineSince", device.online == false ? device.statusChangedAt.map(JSONValue.integer) ?? .null : .null),
                ("graceSeconds", .double(agent.configuration.offlineGracePeriod.seconds)),
            ])), nil)
        case "group_edit_devices":
            let groups = (try? local?.groups(containing: device.id)) ?? []
            return make(.ok, .object(JSONObject([("groups", .array(groups.map { .string($0.name) }))])), nil)
        case "group_create":
            let groups = (try? local?.groups()) ?? []
            return make(.ok, .object(JSONObject([
                ("groups", .array(groups.map { group in
                    .object(JSONObject([("name", .string(group.name)), ("devices", .array(group.devices.map(JSONValue.string))),
                                        ("includesThisDevice", .bool(group.devices.contains(device.id)))]))
                })),
            ])), nil)
        case "check_device_network":
            return await checkNetwork(device, make)
        case "check_firmware_update":
            // The catalog first; a layout's own `versions` (or `latest`) only for products the catalog lacks.
            let current = device.info.firmwareVersion
            let image = agent.firmwareCatalog.latest(for: device.info.productId)
            let versions = item.options["versions"]?.objectValue
            let available = image?.version ?? device.info.productId.flatMap { versions?[$0]?.stringValue }
                ?? item.options["latest"]?.stringValue
            let newer = available.map { FirmwareVersion.isNewer($0, than: current) } ?? false
            var value = JSONObject([
                ("current", current.map(JSONValue.string) ?? .null), ("available", available.map(JSONValue.string) ?? .null),
                ("updateAvailable", .bool(newer)),
            ])
            if let notes = image?.notes { value["notes"] = .string(notes) }
            return make(.ok, .object(value), available == nil ? "no firmware in the catalog for this product" : nil)
        case "show_infrared_gateway_sub_device":
            let subDevices = agent.cache.subDevices(of: device.id)
            guard device.info.category == .gateway || !subDevices.isEmpty else {
                return make(.notApplicable, nil, "\(device.id) is not a gateway")
            }
            let names = (try? local?.allMetadata()) ?? [:]
            return make(.ok, .object(JSONObject([
                ("subDevices", .array(subDevices.map { sub in
                    .object(JSONObject([("devId", .string(sub.id)),
                                        ("name", sub.displayName(names[sub.id]).map(JSONValue.string) ?? .null),
                                        ("online", sub.online.map(JSONValue.bool) ?? .null)]))
                })),
            ])), nil)
        case "footer":
            return make(.ok, .object(JSONObject([("action", "remove"), ("title", "Remove device")])), nil)
        default:
            return make(.unknownCellType, nil, nil)
        }
    }

    /// A live `info/get` round trip: latency and the signal quality it reports.
    private func checkNetwork(_ device: DeviceSnapshot,
                              _ make: (DetailItem.Status, JSONValue?, String?) -> DetailItem) async -> DetailItem {
        let outcome = await agent.send(.getInfo, to: device.id, timeout: networkTimeout)
        guard outcome.succeeded else {
            return make(.failed, .object(JSONObject([("outcome", .string(outcome.outcome))])),
                        outcome.error?.description ?? "no answer")
        }
        let signal = agent.cache.device(device.id)?.wifiSignal?.dBm
        return make(.ok, .object(JSONObject([
            ("latencyMs", .integer(outcome.elapsed.milliseconds)),
            ("wifiSignal", signal.map { .integer(Int64($0)) } ?? .null),
            ("quality", .string(signal.map { SignalQuality(dBm: $0).rawValue } ?? "unknown")),
        ])), nil)
    }

    /// Compares dotted versions numerically (`1.10.0` > `1.9.2`, `2.0.0-rc1` < `2.0.0`); > 0 when `a` is newer.
    /// A version that does not parse counts as older than one that does.
    public static func compareVersions(_ a: String, _ b: String) -> Int {
        switch (FirmwareVersion(a), FirmwareVersion(b)) {
        case let (l?, r?): FirmwareVersion.compare(l, r)
        case (nil, nil): 0
        case (nil, _): -1
        case (_, nil): 1
        }
    }

    /// The body's result, or nil when it takes longer than `timeout` (the body is then cancelled).
    static func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
