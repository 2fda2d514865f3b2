import Foundation
import JSON
import MQTT
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Three real `nats-server` processes on loopback running deploy/nats/nats-1.conf, nats-2.conf and nats-3.conf as
/// shipped: a copy of each in which only the listeners' ports, the route hosts and the JetStream directory are
/// replaced. Each node has its own directory (its log, its JetStream store) under one temporary directory; every
/// node is killed with SIGKILL at the end. Nodes are numbered 0, 1, 2 (server names nats-1 … nats-3).
public final class NATSCluster: Sendable {
    public struct Node: Sendable {
        public let name: String
        public let clientPort: Int
        public let clusterPort: Int
        public let mqttPort: Int
        public let monitorPort: Int
        public let directory: String
    }

    /// The shipped files' users and the passwords the test gives them (through the environment, as shipped).
    public static let passwords = ["thing-agent": "agent-secret", "thing-agent-cli": "cli-secret",
                                   "devices": "devices-secret"]
    public static let server = "/usr/sbin/nats-server"
    /// The streams NATS keeps MQTT in (2.9): sessions, messages, retained messages.
    public static let mqttStreams = ["$MQTT_sess", "$MQTT_msgs", "$MQTT_rmsgs"]

    public let nodes: [Node]
    public let directory: String
    private let processes: Mutex<[ChildProcess?]>

    public func mqttURL(_ node: Int) -> String { "mqtt://127.0.0.1:\(nodes[node].mqttPort)" }
    public var mqttURLs: [String] { nodes.indices.map(mqttURL) }
    public func log(_ node: Int) -> String {
        (try? String(contentsOfFile: nodes[node].directory + "/nats.log", encoding: .utf8)) ?? ""
    }
    /// The node whose MQTT port is `url`'s.
    public func node(url: String) -> Int? { mqttURLs.firstIndex(of: url) }

    private init(directory: String, nodes: [Node]) {
        self.directory = directory
        self.nodes = nodes
        processes = Mutex(nodes.map { _ in nil })
    }

    /// Starts the three nodes and returns once every node takes MQTT connections (JetStream formed, the MQTT streams
    /// made). Fails, naming the package, where nats-server is not installed.
    public static func start() async throws -> NATSCluster {
        guard FileManager.default.isExecutableFile(atPath: server) else {
            throw TestSupportError("\(server) is missing: install Debian's nats-server 2.9 (scripts/install-deps does)")
        }
        let directory = try makeTemporaryDirectory("nats")
        var nodes: [Node] = []
        for index in 0..<3 {
            let node = Node(name: "nats-\(index + 1)", clientPort: try freeLoopbackPort(), clusterPort: try freeLoopbackPort(),
                            mqttPort: try freeLoopbackPort(), monitorPort: try freeLoopbackPort(),
                            directory: directory + "/nats-\(index + 1)")
            try FileManager.default.createDirectory(atPath: node.directory + "/jetstream", withIntermediateDirectories: true)
            nodes.append(node)
        }
        let cluster = NATSCluster(directory: directory, nodes: nodes)
        do {
            for index in nodes.indices { try cluster.writeConfiguration(index) }
            for index in nodes.indices { try cluster.launch(index) }
            for index in nodes.indices { try await cluster.waitForMQTT(index, timeout: .seconds(60)) }
        } catch {
            cluster.stop()
            throw error
        }
        return cluster
    }

    deinit { stop() }

    /// The shipped file of `node` with its ports, route hosts and store directory replaced; every other line as it is.
    static func adapt(_ shipped: String, node: Node, all: [Node]) throws -> String {
        var text = shipped
        func replace(_ old: String, _ new: String) throws {
            guard text.contains(old) else { throw TestSupportError("the shipped NATS file has no \(old)") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        try replace("listen: 0.0.0.0:4222", "listen: 127.0.0.1:\(node.clientPort)")
        try replace("http: 127.0.0.1:8222", "http: 127.0.0.1:\(node.monitorPort)")
        try replace("listen: 0.0.0.0:6222", "listen: 127.0.0.1:\(node.clusterPort)")
        try replace("listen: 0.0.0.0:1883", "listen: 127.0.0.1:\(node.mqttPort)")
        try replace("store_dir: /var/lib/nats", "store_dir: \"\(node.directory)/jetstream\"")
        for (index, other) in all.enumerated() {
            try replace("nats-route://nats-\(index + 1).example.net:6222", "nats-route://127.0.0.1:\(other.clusterPort)")
        }
        return text
    }

    private func writeConfiguration(_ index: Int) throws {
        let node = nodes[index]
        let shipped = try String(contentsOfFile: repositoryRoot() + "/deploy/nats/\(node.name).conf", encoding: .utf8)
        try Self.adapt(shipped, node: node, all: nodes)
            .write(toFile: node.directory + "/nats.conf", atomically: true, encoding: .utf8)
    }

    private func launch(_ index: Int) throws {
        let node = nodes[index]
        let environment = ["THING_AGENT_PASSWORD": Self.passwords["thing-agent"]!,
                           "THING_AGENT_CLI_PASSWORD": Self.passwords["thing-agent-cli"]!,
                           "THING_AGENT_DEVICES_PASSWORD": Self.passwords["devices"]!]
        let child = try ChildProcess.spawn(Self.server, ["-c", node.directory + "/nats.conf", "-l", node.directory + "/nats.log"],
                                           stdout: node.directory + "/nats.out", stderr: nil, environment: environment)
        processes.withLock { $0[index] = child }
    }

    /// Whether the node's process runs.
    public func isRunning(_ index: Int) -> Bool { processes.withLock { $0[index] != nil } }

    /// SIGKILL, then waits for the process to end. Idempotent.
    public func kill(_ index: Int) {
        let child = processes.withLock { processes in
            defer { processes[index] = nil }
            return processes[index]
        }
        guard let child else { return }
        child.signal(SIGKILL)
        child.wait()
    }

    /// Starts a killed node again, with its store, and returns once its MQTT port accepts connections (its
    /// JetStream may still be catching up).
    public func restart(_ index: Int) async throws {
        kill(index)
        try launch(index)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(30)
        while !loopbackPortAccepts(nodes[index].mqttPort) {
            if clock.now >= deadline { throw TestSupportError("\(nodes[index].name) did not listen again within 30 s") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Kills every node and removes the directory. Idempotent; also done in deinit.
    public func stop() {
        for index in nodes.indices { kill(index) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Waits until a client of the `devices` user connects to the node over MQTT 3.1.1 and a QoS 1 publish is
    /// acknowledged (the first MQTT connect of a cluster makes the MQTT streams, which takes a few seconds).
    public func waitForMQTT(_ index: Int, timeout: Duration) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var last = ""
        while clock.now < deadline {
            var configuration = MQTTConfiguration(url: mqttURL(index), clientID: "probe-\(UInt32.random(in: 0...UInt32.max))")
            configuration.username = "devices"
            configuration.password = Self.passwords["devices"]
            configuration.connectTimeout = .seconds(5)
            do {
                let client = try MQTTClient(configuration: configuration, streamMessages: false)
                do {
                    try await client.connect()
                    try await client.publish("probe/\(nodes[index].name)", "up", qos: .atLeastOnce)
                    await client.disconnect()
                    return
                } catch {
                    await client.disconnect()
                    throw error
                }
            } catch {
                last = "\(error)"
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        throw TestSupportError("\(nodes[index].name) took no MQTT client within \(timeout): \(last)\n\(log(index).suffix(3000))")
    }

    // MARK: JetStream's leaders

    /// Each MQTT consumer's state as its leader reports it (/jsz): for a failure's message, to tell a message the
    /// broker never handed to a client (pending, or delivered and unacknowledged) from one the client dropped.
    public func consumerStates() -> [String] {
        var lines: [String] = []
        for index in nodes.indices where isRunning(index) {
            guard let answer = try? httpRequest(port: nodes[index].monitorPort,
                                                path: "/jsz?accounts=true&streams=true&consumers=true&leader-only=true"),
                  let json = try? JSONParser.parse(answer.body) else { continue }
            for account in json["account_details"]?.arrayValue ?? [] {
                for stream in account["stream_detail"]?.arrayValue ?? [] {
                    if stream["name"] == "$MQTT_msgs" {
                        lines.append("\(nodes[index].name) leads $MQTT_msgs, last seq \(stream["state"]?["last_seq"]?.serialized() ?? "?")")
                    }
                    for consumer in stream["consumer_detail"]?.arrayValue ?? [] {
                        let fields = ["num_pending", "num_ack_pending", "num_redelivered", "num_waiting"]
                            .map { "\($0)=\(consumer[$0]?.serialized() ?? "?")" }.joined(separator: " ")
                        lines.append("\(nodes[index].name): \(stream["name"]?.stringValue ?? "?")/\(consumer["name"]?.stringValue ?? "?") "
                                     + "filter=\(consumer["config"]?["filter_subject"]?.stringValue ?? "?") "
                                     + "delivered=\(consumer["delivered"]?["stream_seq"]?.serialized() ?? "?") "
                                     + "ackfloor=\(consumer["ack_floor"]?["stream_seq"]?.serialized() ?? "?") \(fields)")
                    }
                }
            }
        }
        // The servers' own words on what can hold up a delivery: a store request that timed out (its publisher is
        // then disconnected), leaders moving, lost quorum, slow read loops.
        for index in nodes.indices {
            for line in log(index).split(separator: "\n") where ["timeout for request", "leader", "quorum", "Readloop",
                                                                 "Slow Consumer", "[ERR]"].contains(where: line.contains) {
                lines.append("\(nodes[index].name) log: \(line)")
            }
        }
        return lines
    }

    /// The server name of the JetStream meta leader, as `node`'s monitoring port says (/jsz).
    public func metaLeader(via node: Int) throws -> String? {
        let answer = try httpRequest(port: nodes[node].monitorPort, path: "/jsz")
        return try JSONParser.parse(answer.body)["meta_cluster"]?["leader"]?.stringValue
    }

    /// The server name leading `stream`.
    public func streamLeader(_ stream: String, via node: Int) throws -> String? {
        try request("$JS.API.STREAM.INFO.\(stream)", via: node)["cluster"]?["leader"]?.stringValue
    }

    /// Moves the leadership of every MQTT stream and of their consumers off `index` with JetStream's step-down
    /// requests, as before a planned restart (docs/brokers.md), asking through another node, and returns once no
    /// stream or consumer is led by it. The meta leader cannot be moved without the system account: a caller that
    /// needs it elsewhere picks a node that does not lead it (`metaLeader`).
    public func moveLeaders(off index: Int, timeout: Duration = .seconds(30)) async throws {
        let name = nodes[index].name
        let via = (index + 1) % nodes.count
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            var led: [String] = []
            for stream in Self.mqttStreams {
                if try streamLeader(stream, via: via) == name {
                    led.append(stream)
                    _ = try request("$JS.API.STREAM.LEADER.STEPDOWN.\(stream)", via: via)
                }
                let consumers = try request("$JS.API.CONSUMER.LIST.\(stream)", via: via)["consumers"]?.arrayValue ?? []
                for consumer in consumers where consumer["cluster"]?["leader"]?.stringValue == name {
                    guard let consumerName = consumer["name"]?.stringValue else { continue }
                    led.append("\(stream) > \(consumerName)")
                    _ = try request("$JS.API.CONSUMER.LEADER.STEPDOWN.\(stream).\(consumerName)", via: via)
                }
            }
            if led.isEmpty { return }
            if clock.now >= deadline { throw TestSupportError("\(name) still leads \(led) after \(timeout)") }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    /// One request over NATS's own protocol (a plain TCP text protocol) to `node`'s client port, as the `thing-agent`
    /// user: the answer's JSON.
    public func request(_ subject: String, _ payload: String = "", via node: Int,
                        timeout: Duration = .seconds(10)) throws -> JSONValue {
        let text = try NATSRequest.send(port: nodes[node].clientPort, user: "thing-agent",
                                        password: Self.passwords["thing-agent"]!, subject: subject, payload: payload,
                                        timeout: timeout)
        return try JSONParser.parse(text)
    }
}

/// A NATS request/reply in the protocol's text form: CONNECT, SUB to an inbox, PUB with that reply subject, and the
/// first MSG on the inbox.
enum NATSRequest {
    static func send(port: Int, user: String, password: String, subject: String, payload: String,
                     timeout: Duration) throws -> String {
        let socket = try connectLoopback(port: port)
        defer { close(socket) }
        let inbox = "_INBOX.test.\(UInt32.random(in: 0...UInt32.max))"
        let connect = JSONValue.object(JSONObject([("user", .string(user)), ("pass", .string(password)),
                                                   ("verbose", .bool(false)), ("pedantic", .bool(false))]))
        let body = Array(payload.utf8)
        var out = Array("CONNECT \(connect.serialized())\r\nSUB \(inbox) 1\r\nPUB \(subject) \(inbox) \(body.count)\r\n".utf8)
        out += body + Array("\r\n".utf8)
        guard write(socket, out, out.count) == out.count else { throw TestSupportError("NATS: write failed") }
        let deadline = ContinuousClock.now + timeout
        var buffer: [UInt8] = []
        while true {
            // A MSG line, then its payload of the length the line gives.
            if let lineEnd = find(Array("\r\n".utf8), in: buffer) {
                let line = String(decoding: buffer[..<lineEnd], as: UTF8.self)
                if line.hasPrefix("-ERR") { throw TestSupportError("NATS \(subject): \(line)") }
                if line.hasPrefix("MSG "), let length = line.split(separator: " ").last.flatMap({ Int($0) }) {
                    let start = lineEnd + 2
                    if buffer.count >= start + length {
                        return String(decoding: buffer[start..<(start + length)], as: UTF8.self)
                    }
                } else {
                    buffer.removeFirst(lineEnd + 2)  // INFO, PING and the like
                    if line.hasPrefix("PING") {
                        let pong = Array("PONG\r\n".utf8)
                        _ = write(socket, pong, pong.count)
                    }
                    continue
                }
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw TestSupportError("NATS \(subject): no answer within \(timeout)") }
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, Int32(min(left.components.seconds * 1000 + 1, 1000)))
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(socket, &chunk, chunk.count)
            if count == 0 { throw TestSupportError("NATS \(subject): connection closed") }
            if count > 0 { buffer += chunk[..<count] }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where Array(haystack[index..<(index + needle.count)]) == needle {
            return index
        }
        return nil
    }

    private static func connectLoopback(port: Int) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(socket)
            throw TestSupportError("NATS: cannot connect to port \(port): \(String(cString: strerror(errno)))")
        }
        return socket
    }
}

/// Starts the cluster, runs `body`, and always stops the cluster, even when `body` throws.
public func withNATSCluster<T>(_ body: (NATSCluster) async throws -> T) async throws -> T {
    let cluster = try await NATSCluster.start()
    do {
        let result = try await body(cluster)
        cluster.stop()
        return result
    } catch {
        cluster.stop()
        throw error
    }
}
