/// Which broker connection carries which simulated devices.
///
/// A device has a connection of its own, with its will, as a real one does; a sub-device rides on its gateway's,
/// since the gateway speaks for it. libmosquitto's loop waits with select(), which only handles descriptors below
/// 1024, and each client holds three (its socket and a wake-up pair): one process cannot hold more than about 340
/// clients. So beyond `maxConnections` (default 250) the remaining devices share pooled connections of up to
/// `devicesPerPool` devices each, like a cloud platform that speaks for many devices. A pooled device has no will
/// of its own: the simulator publishes its offline status when it stops, but not when it is killed.
struct ConnectionPlan: Equatable {
    struct Link: Equatable {
        /// The devices it carries; the first one's will is the connection's will, unless `pooled`.
        var devices: [String]
        var pooled: Bool
    }

    static let devicesPerPool = 200

    var links: [Link]

    init(_ plans: [DevicePlan], maxConnections: Int) {
        var groups: [(key: String, devices: [String])] = []
        var indexOfKey: [String: Int] = [:]
        for plan in plans {
            let key = plan.category == .subdevice ? (plan.gatewayId ?? plan.id) : plan.id
            if let index = indexOfKey[key] {
                groups[index].devices.append(plan.id)
            } else {
                indexOfKey[key] = groups.count
                groups.append((key, [plan.id]))
            }
        }
        let budget = max(1, maxConnections)
        guard groups.count > budget else {
            links = groups.map { Link(devices: $0.devices, pooled: false) }
            return
        }
        // Give up dedicated connections until the rest fit into the pools those make room for.
        var pools = 1
        while true {
            let dedicated = budget - pools
            let rest = groups.dropFirst(max(0, dedicated)).reduce(0) { $0 + $1.devices.count }
            if dedicated <= 0 || rest <= pools * Self.devicesPerPool { break }
            pools += 1
        }
        let dedicated = max(0, budget - pools)
        links = groups.prefix(dedicated).map { Link(devices: $0.devices, pooled: false) }
        let rest = groups.dropFirst(dedicated).flatMap(\.devices)
        let perPool = (rest.count + pools - 1) / pools
        for start in stride(from: 0, to: rest.count, by: max(1, perPool)) {
            links.append(Link(devices: Array(rest[start..<min(rest.count, start + perPool)]), pooled: true))
        }
    }

    var dedicatedCount: Int { links.filter { !$0.pooled }.count }
    var pooledDevices: Int { links.filter(\.pooled).reduce(0) { $0 + $1.devices.count } }
}
