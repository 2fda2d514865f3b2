import Foundation
import MQTT
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// mosquitto running deploy/mosquitto.conf and deploy/mosquitto.acl as shipped: a copy in which only the
/// certificate, password, ACL and data paths and the listeners' ports are replaced (listeners bound to 127.0.0.1).
public final class ShippedBroker: Sendable {
    /// The fleet listener (8883 as shipped): devices and services, client id = user name.
    public let fleetPort: Int
    /// The agent listener (8884 as shipped): the agent and the operators' CLI.
    public let agentPort: Int
    /// The plain loopback listener (1883 as shipped): the same users as the agent listener.
    public let loopbackPort: Int
    /// The TuyaLink devices' listener (8885 as shipped, deploy/mosquitto-tuyalink.conf with its ACL,
    /// deploy/mosquitto-tuyalink.acl); nil unless started `withTuyaLink`.
    public let tuyaLinkPort: Int?
    public let directory: String
    public let certificates: TestCertificates
    /// Every user's password.
    public static let password = "secret-1"
    private let process: Mutex<ChildProcess?>

    public var fleetURL: String { "mqtts://127.0.0.1:\(fleetPort)" }
    public var agentURL: String { "mqtts://127.0.0.1:\(agentPort)" }
    public var loopbackURL: String { "mqtt://127.0.0.1:\(loopbackPort)" }
    public var tuyaLinkURL: String? { tuyaLinkPort.map { "mqtts://127.0.0.1:\($0)" } }
    public var output: String { (try? String(contentsOfFile: directory + "/mosquitto.out", encoding: .utf8)) ?? "" }

    /// Starts the shipped configuration with `fleetUsers` in passwd and `agentUsers` in passwd-agent.
    /// `withTuyaLink`: with the TuyaLink listener too, deploy/mosquitto-tuyalink.conf appended to mosquitto.conf as
    /// its comment says (only its paths and port replaced, as the others') and its ACL file beside the other.
    public init(fleetUsers: [String], agentUsers: [String], withTuyaLink: Bool = false) async throws {
        directory = try makeTemporaryDirectory("shipped-broker")
        certificates = try TestCertificates.make(in: directory)
        fleetPort = try freeLoopbackPort()
        agentPort = try freeLoopbackPort()
        loopbackPort = try freeLoopbackPort()
        tuyaLinkPort = withTuyaLink ? try freeLoopbackPort() : nil
        process = Mutex(nil)
        let deploy = repositoryRoot() + "/deploy"
        var shipped = try String(contentsOfFile: deploy + "/mosquitto.conf", encoding: .utf8)
        var ports = ["8883": fleetPort, "8884": agentPort, "1883": loopbackPort]
        if let tuyaLinkPort {
            if !shipped.hasSuffix("\n") { shipped += "\n" }
            shipped += try String(contentsOfFile: deploy + "/mosquitto-tuyalink.conf", encoding: .utf8)
            ports["8885"] = tuyaLinkPort
            try FileManager.default.copyItem(atPath: deploy + "/mosquitto-tuyalink.acl",
                                            toPath: directory + "/acl-tuyalink")
        }
        try Self.adapt(shipped, directory: directory, certificates: certificates, ports: ports)
            .write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: deploy + "/mosquitto.acl", toPath: directory + "/acl")
        try Self.writePasswords(fleetUsers, to: directory + "/passwd", in: directory)
        try Self.writePasswords(agentUsers, to: directory + "/passwd-agent", in: directory)
        try Self.handOver(directory)
        try await launch()
    }

    /// The shipped lines with the host's paths and ports replaced; every other line as it is.
    static func adapt(_ shipped: String, directory: String, certificates: TestCertificates,
                      ports: [String: Int]) throws -> String {
        var lines: [String] = []
        for line in shipped.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let words = line.split(separator: " ").map(String.init)
            guard let key = words.first, !key.hasPrefix("#"), words.count >= 2 else {
                lines.append(line)
                continue
            }
            switch key {
            case "listener":
                guard let port = ports[words[1]] else { throw TestSupportError("unexpected listener: \(line)") }
                lines.append("listener \(port) 127.0.0.1")
            case "cafile": lines.append("cafile \(certificates.caFile)")
            case "certfile": lines.append("certfile \(certificates.serverCertFile)")
            case "keyfile": lines.append("keyfile \(certificates.serverKeyFile)")
            case "password_file", "acl_file":
                lines.append("\(key) \(directory)/\(URL(fileURLWithPath: words[1]).lastPathComponent)")
            case "persistence_location": lines.append("persistence_location \(directory)/")
            case "plugin_opt_config_file":
                lines.append("plugin_opt_config_file \(directory)/\(URL(fileURLWithPath: words[1]).lastPathComponent)")
            case "plugin":
                // The shipped path is Debian's on amd64; another architecture has it under its own triplet.
                guard let plugin = FileManager.default.fileExists(atPath: words[1])
                    ? words[1] : MosquittoBroker.dynamicSecurityPlugin else {
                    throw TestSupportError("the dynamic-security plugin is not installed: \(line)")
                }
                lines.append("plugin \(plugin)")
            default:
                if words[1].hasPrefix("/") { throw TestSupportError("a path the test does not replace: \(line)") }
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    private static func writePasswords(_ users: [String], to path: String, in directory: String) throws {
        try users.map { "\($0):\(password)\n" }.joined().write(toFile: path, atomically: true, encoding: .utf8)
        try ChildProcess.run("/usr/bin/mosquitto_passwd", ["-U", path], in: directory)
    }

    /// Started as root, mosquitto drops to the user "mosquitto" (the shipped config names no other): it must be
    /// able to read its files and write its data there.
    static func handOver(_ directory: String) throws {
        guard geteuid() == 0, let user = getpwnam("mosquitto") else { return }
        let uid = user.pointee.pw_uid, gid = user.pointee.pw_gid
        chown(directory, uid, gid)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            chown(directory + "/" + name, uid, gid)
        }
    }

    private func launch() async throws {
        try await Self.launch(in: directory, ports: [fleetPort, agentPort, loopbackPort] + (tuyaLinkPort.map { [$0] } ?? []),
                              into: process)
    }

    /// Starts mosquitto on `directory`'s mosquitto.conf (its output in mosquitto.out) into `process`, and returns
    /// once every port accepts connections; throws with the output when it exits or is not up within 10 s.
    static func launch(in directory: String, ports: [Int], into process: borrowing Mutex<ChildProcess?>) async throws {
        let child = try ChildProcess.spawn("/usr/sbin/mosquitto", ["-c", directory + "/mosquitto.conf"],
                                           outputFile: directory + "/mosquitto.out")
        process.withLock { $0 = child }
        let output = { (try? String(contentsOfFile: directory + "/mosquitto.out", encoding: .utf8)) ?? "" }
        let deadline = ContinuousClock.now + .seconds(10)
        while !ports.allSatisfy(loopbackPortAccepts) {
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid {
                process.withLock { $0 = nil }
                throw TestSupportError("mosquitto exited at start with the shipped configuration: \(output())")
            }
            if ContinuousClock.now >= deadline {
                throw TestSupportError("mosquitto did not accept connections within 10 s: \(output())")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// An MQTT client for `user`: on the fleet listener unless `agentListener`.
    public func client(_ user: String, clientID: String? = nil, agentListener: Bool = false,
                       cleanSession: Bool = true) throws -> MQTTClient {
        var configuration = MQTTConfiguration(
            url: agentListener ? agentURL : fleetURL,
            clientID: clientID ?? "\(user)-\(UInt32.random(in: 0...UInt32.max))")
        configuration.username = user
        configuration.password = Self.password
        configuration.tls = MQTTTLS(caFile: certificates.caFile)
        configuration.cleanSession = cleanSession
        configuration.reconnectMaxDelay = .seconds(1)
        return try MQTTClient(configuration: configuration, streamMessages: true)
    }

    public func stop() {
        Self.stop(process, removing: directory)
    }

    /// Kills the broker (SIGKILL, then waits for it) and removes its directory.
    static func stop(_ process: borrowing Mutex<ChildProcess?>, removing directory: String) {
        if let child = process.withLock({ $0 }) {
            child.signal(SIGKILL)
            child.wait()
        }
        process.withLock { $0 = nil }
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit {
        stop()
    }
}
