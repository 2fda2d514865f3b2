import JSON
import ThingAgent

/// What `thing-agent simulate` was asked for.
struct SimulatorOptions: Sendable {
    var devices = 10
    var gateways = 2
    var subdevicesPerGateway = 3
    /// Seconds between property reports of one device.
    var reportInterval: Double = 10
    /// Seconds between signal reports of one device.
    var signalInterval: Double = 5
    var seed: UInt64 = 1
    /// Devices come up spread over this many seconds.
    var ramp: Double = 0
    /// 0: until SIGINT or SIGTERM.
    var duration: Double = 0
    /// Probability that a gateway transfer fails.
    var failureRate: Double = 0
    /// Seconds between the stages of a gateway transfer.
    var transferStep: Double = 1
    /// Probability that a firmware upgrade fails, and where.
    var otaFailureRate: Double = 0
    var otaFailAt = UpgradeFailure.flash
    /// Seconds between the stages of a firmware upgrade.
    var otaStep: Double = 1
    /// Broker connections at most (see `ConnectionPlan`).
    var maxConnections = 250
    var spaceId: Int64 = 1001
    /// The dialects the fleet speaks: one for the whole fleet, or several that split it (`FleetPlan`).
    var dialects: [SimulatedDialect] = [.native]
    /// Where TuyaLink devices connect (a TuyaLink listener of their own, deploy/mosquitto-tuyalink.conf); nil: the
    /// broker of the others.
    var tuyaLinkBrokers: [String]?

    var total: Int { devices + gateways * (1 + subdevicesPerGateway) }
}

/// The wire dialect of a simulated device (`simulate --dialect`).
enum SimulatedDialect: String, Sendable, CaseIterable {
    /// The agent's own protocol (docs/protocol.md).
    case native
    /// Alibaba's Alink, as its device SDK Linkkit speaks it (docs/protocol.md, "Alink").
    case alink
    /// Tuya's TuyaLink, as its C device SDK speaks it (docs/protocol.md, "TuyaLink").
    case tuyalink
}

/// One simulated device, fixed by the seed: ids, names, addresses and its own random stream.
struct DevicePlan: Sendable {
    let index: Int
    let id: String
    let name: String
    let category: DeviceCategory
    let productId: String
    let gatewayId: String?
    let abilities: [DeviceAbility]
    let mac: String
    let lanIp: String
    let firmwareVersion: String
    let module: String
    /// Zigbee channel of a gateway.
    let channel: Int?
    /// One space for the whole fleet, so that any gateway can replace any other.
    let spaceId: Int64
    var dialect: SimulatedDialect = .native

    /// An Alink device's product key and name (its id is `<pk>.<dn>`); nil for a native device.
    var alink: (productKey: String, deviceName: String)? {
        guard dialect == .alink, let (pk, dn) = AlinkDialect.split(id) else { return nil }
        return (String(pk), String(dn))
    }

    /// A TuyaLink device's id: its deviceId on the wire (`tylink/<id>/...`).
    static let tuyaLinkPrefix = "tl-"
}

/// The fleet for a seed: gateways first, each followed by its sub-devices, then the plain devices.
///
/// With several dialects (`--dialect native,alink,tuyalink`) the gateways and the plain devices are each split in
/// that order: of 20 devices and two dialects the first 10 speak the first, the next 10 the second; a gateway's
/// sub-devices speak its dialect. An Alink device's id is `<productKey>.<name>`, its name the id a native device in
/// its place has (`a1Light1.dev-0dd7-11`), its product the Alink product of its kind (`BuiltinModels`). A TuyaLink
/// device's id is `tl-` before the id a native device in its place has (`tl-dev-0dd7-17`: no dot, which would look
/// like an Alink id), its product the native one (TuyaLink's values are the agent's own: booleans, enum names).
enum FleetPlan {
    static let rooms = ["Hall", "Kitchen", "Bedroom", "Study", "Porch", "Garage", "Attic", "Cellar", "Nursery",
                        "Office", "Lobby", "Patio", "Pantry", "Landing"]
    static let lightKinds = ["light", "lamp", "ceiling light", "strip", "spot", "lantern"]

    static func make(_ options: SimulatorOptions) -> [DevicePlan] {
        var generator = SeededGenerator(seed: options.seed)
        // A per-seed tag keeps two fleets with different seeds apart on one broker.
        let tag = String(generator.next() & 0xFFFF, radix: 16).leftPadded(to: 4)
        let width = String(max(options.devices, options.gateways, options.subdevicesPerGateway, 1)).count
        func number(_ n: Int) -> String { String(n).leftPadded(to: width) }

        var plans: [DevicePlan] = []
        /// The dialect of the `n`th (from 1) of `count`: the fleet split in the order the dialects are given.
        func dialect(_ n: Int, of count: Int) -> SimulatedDialect {
            let dialects = options.dialects.isEmpty ? [.native] : options.dialects
            return dialects[min(dialects.count - 1, (n - 1) * dialects.count / max(1, count))]
        }
        func add(id native: String, category: DeviceCategory, product: String, gateway: String?,
                 abilities: [DeviceAbility], dialect: SimulatedDialect, name: (inout SeededGenerator) -> String) {
            let index = plans.count
            // Alink and TuyaLink have no Wi-Fi scan and no gateway replacement: their devices list no such abilities.
            let (id, product, abilities): (String, String, [DeviceAbility]) = switch dialect {
            case .native: (native, product, abilities)
            case .alink:
                (AlinkDialect.deviceID(productKey: BuiltinModels.alinkProduct[product] ?? product, deviceName: native),
                 BuiltinModels.alinkProduct[product] ?? product, [])
            case .tuyalink: (DevicePlan.tuyaLinkPrefix + native, product, [])
            }
            var own = SeededGenerator(seed: options.seed, stream: index)
            let bytes = (0..<3).map { _ in String(UInt8.random(in: 0...255, using: &own), radix: 16).leftPadded(to: 2) }
            plans.append(DevicePlan(
                index: index, id: id, name: name(&own), category: category, productId: product, gatewayId: gateway,
                abilities: abilities, mac: "a4:c1:38:" + bytes.joined(separator: ":"),
                lanIp: "192.168.\(1 + index / 250).\(2 + index % 250)",
                firmwareVersion: "1.\(Int.random(in: 0...4, using: &own)).\(Int.random(in: 0...9, using: &own))",
                module: category == .subdevice ? "ZS3L" : "WBR3",
                channel: category == .gateway ? Int.random(in: 11...26, using: &own) : nil, spaceId: options.spaceId,
                dialect: dialect))
        }
        for g in stride(from: 1, through: options.gateways, by: 1) {
            let spoken = dialect(g, of: options.gateways)
            add(id: "gw-\(tag)-\(number(g))", category: .gateway, product: BuiltinModels.gateway, gateway: nil,
                abilities: [.gatewayTransfer, .wifiList], dialect: spoken) { "\(rooms.randomElement(using: &$0)!) gateway" }
            let gateway = plans[plans.count - 1].id
            for s in stride(from: 1, through: options.subdevicesPerGateway, by: 1) {
                add(id: "sub-\(tag)-\(number(g))-\(number(s))", category: .subdevice, product: BuiltinModels.sensor,
                    gateway: gateway, abilities: [], dialect: spoken) { "\(rooms.randomElement(using: &$0)!) sensor" }
            }
        }
        for d in stride(from: 1, through: options.devices, by: 1) {
            add(id: "dev-\(tag)-\(number(d))", category: .device, product: BuiltinModels.light, gateway: nil,
                abilities: [.wifiList], dialect: dialect(d, of: options.devices)) {
                "\(rooms.randomElement(using: &$0)!) \(lightKinds.randomElement(using: &$0)!)"
            }
        }
        return plans
    }

    /// The product of each directly connected TuyaLink device, `{"<deviceId>": "<productId>"}`: the agent must be
    /// given it (config `deviceProducts`), since the TuyaLink wire never names it. A sub-device's product comes with
    /// its gateway's bind.
    static func deviceProducts(_ plans: [DevicePlan]) -> JSONObject {
        JSONObject(plans.filter { $0.dialect == .tuyalink && $0.category != .subdevice }.map { ($0.id, .string($0.productId)) })
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
