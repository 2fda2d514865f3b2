import Foundation
import MQTT
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// mosquitto running deploy/mosquitto-dynsec.conf as shipped (only certificate, plugin-file and data paths and the
/// listeners' ports replaced), its plugin file initialised as the file's own comment says:
/// `mosquitto_ctrl dynsec init FILE admin password`.
public final class ShippedDynsecBroker: Sendable {
    /// The TLS listener (8883 as shipped).
    public let tlsPort: Int
    /// The loopback listener (1883 as shipped).
    public let loopbackPort: Int
    public let directory: String
    public let certificates: TestCertificates
    private let process: Mutex<ChildProcess?>

    public var tlsURL: String { "mqtts://127.0.0.1:\(tlsPort)" }
    public var loopbackURL: String { "mqtt://127.0.0.1:\(loopbackPort)" }
    public var output: String { (try? String(contentsOfFile: directory + "/mosquitto.out", encoding: .utf8)) ?? "" }

    public init(admin: String, password: String) async throws {
        directory = try makeTemporaryDirectory("shipped-dynsec")
        certificates = try TestCertificates.make(in: directory)
        tlsPort = try freeLoopbackPort()
        loopbackPort = try freeLoopbackPort()
        process = Mutex(nil)
        let shipped = try String(contentsOfFile: repositoryRoot() + "/deploy/mosquitto-dynsec.conf", encoding: .utf8)
        let configuration = try ShippedBroker.adapt(shipped, directory: directory, certificates: certificates,
                                                    ports: ["8883": tlsPort, "1883": loopbackPort])
        try configuration.write(toFile: directory + "/mosquitto.conf", atomically: true, encoding: .utf8)
        guard let file = configuration.split(separator: "\n").first(where: { $0.hasPrefix("plugin_opt_config_file ") })
        else { throw TestSupportError("the shipped configuration names no plugin file") }
        try ChildProcess.run("/usr/bin/mosquitto_ctrl", ["dynsec", "init", String(file.dropFirst(23)), admin, password],
                             in: directory)
        try ShippedBroker.handOver(directory)
        try await ShippedBroker.launch(in: directory, ports: [tlsPort, loopbackPort], into: process)
    }

    /// An MQTT client over TLS as `user` with `clientID` (default: the user name).
    public func client(_ user: String, password: String, clientID: String? = nil) throws -> MQTTClient {
        var configuration = MQTTConfiguration(url: tlsURL, clientID: clientID ?? user)
        configuration.username = user
        configuration.password = password
        configuration.tls = MQTTTLS(caFile: certificates.caFile)
        configuration.reconnectMinDelay = .seconds(60)
        configuration.reconnectMaxDelay = .seconds(60)
        return try MQTTClient(configuration: configuration, streamMessages: true)
    }

    public func stop() {
        ShippedBroker.stop(process, removing: directory)
        releaseLoopbackPort(tlsPort)
        releaseLoopbackPort(loopbackPort)
    }

    deinit {
        stop()
    }
}
