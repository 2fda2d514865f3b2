import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real `mosquitto` process on a free 127.0.0.1 port, with its configuration, log and data in a temp directory.
public final class MosquittoBroker: Sendable {
    public struct Options: Sendable {
        /// Non-empty: a password file with these users, and anonymous clients refused.
        public var users: [String: String] = [:]
        /// Adds a TLS listener with certificates made by openssl for this broker.
        public var tls: Bool = false
        /// Whether the TLS listener demands a client certificate signed by the test CA.
        public var requireClientCertificate: Bool = true
        /// Which certificate the TLS listener presents.
        public var serverCertificate: ServerCertificate = .valid
        /// Keeps sessions and retained messages in a database that survives `restart()`; it is saved every second
        /// (a killed broker writes nothing at exit).
        public var persistence: Bool = false
        /// Loads the dynamic-security plugin with a file made by `mosquitto_ctrl dynsec init FILE user password`
        /// (the user is the plugin's admin); anonymous clients are then refused.
        public var dynamicSecurity: (admin: String, password: String)?
        /// Appended to the generated configuration.
        public var extraConfig: String = ""
        public init() {}
    }

    /// Test CA-signed certificates a TLS listener can present.
    public enum ServerCertificate: Sendable {
        /// For 127.0.0.1 and localhost, valid for two days.
        case valid
        /// For elsewhere.example only.
        case wrongHost
        /// Expired.
        case expired
    }

    public let port: Int
    public let tlsPort: Int?
    public let certificates: TestCertificates?
    public let directory: String
    public let options: Options
    private let process: Mutex<ChildProcess?>
    private let removed = Atomic<Bool>(false)

    public var url: String { "mqtt://127.0.0.1:\(port)" }
    public var tlsURL: String? { tlsPort.map { "mqtts://127.0.0.1:\($0)" } }
    public var logFile: String { directory + "/mosquitto.log" }
    public var configFile: String { directory + "/mosquitto.conf" }
    public var passwordFile: String { directory + "/passwords" }
    public var persistenceFile: String { directory + "/mosquitto.db" }
    /// The dynamic-security plugin's JSON file (with `Options.dynamicSecurity`).
    public var dynamicSecurityFile: String { directory + "/dynamic-security.json" }

    /// Where Debian's mosquitto package puts the plugin (`dpkg -L mosquitto | grep dynamic`).
    public static var dynamicSecurityPlugin: String? {
        let candidates = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]
            .map { $0 + "/mosquitto_dynamic_security.so" }
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    private init(options: Options, directory: String, port: Int, tlsPort: Int?, certificates: TestCertificates?) {
        self.options = options
        self.directory = directory
        self.port = port
        self.tlsPort = tlsPort
        self.certificates = certificates
        self.process = Mutex(nil)
    }

    /// Writes the configuration, starts the broker, and returns once its port(s) accept connections.
    public static func start(_ options: Options = .init()) async throws -> MosquittoBroker {
        let directory = try makeTemporaryDirectory("mosquitto")
        let certificates = options.tls ? try TestCertificates.make(in: directory) : nil
        let broker = MosquittoBroker(
            options: options, directory: directory, port: try freeLoopbackPort(),
            tlsPort: options.tls ? try freeLoopbackPort() : nil, certificates: certificates)
        do {
            if let admin = options.dynamicSecurity {
                try ChildProcess.run("/usr/bin/mosquitto_ctrl", [
                    "dynsec", "init", broker.dynamicSecurityFile, admin.admin, admin.password], in: directory)
            }
            try broker.writeConfiguration()
            try broker.setUsers(options.users)
            try await broker.launch()
        } catch {
            broker.stop()
            throw error
        }
        return broker
    }

    deinit {
        stop()
    }

    /// SIGKILL (a broker spawned from a test may ignore SIGTERM), then waits for it to exit. Clients see their
    /// connections drop. Idempotent.
    public func kill() {
        let child = process.withLock { process in
            defer { process = nil }
            return process
        }
        guard let child else { return }
        child.signal(SIGKILL)
        child.wait()
    }

    /// Starts the broker again on the same port(s) with the same configuration (and database when persistent).
    public func restart() async throws {
        kill()
        try await launch()
    }

    /// Freezes the broker (SIGSTOP): connections stay open but nothing is answered.
    public func pause() {
        process.withLock { $0?.signal(SIGSTOP) }
    }

    /// Thaws a paused broker (SIGCONT).
    public func resume() {
        process.withLock { $0?.signal(SIGCONT) }
    }

    /// Kills the broker and removes its directory. Idempotent; also done in deinit.
    public func stop() {
        resume()
        kill()
        if !removed.exchange(true, ordering: .relaxed) {
            try? FileManager.default.removeItem(atPath: directory)
            releaseLoopbackPort(port)
            if let tlsPort { releaseLoopbackPort(tlsPort) }
        }
    }

    /// Replaces the password file (takes effect at the next `restart()`). Empty keeps the file empty.
    public func setUsers(_ users: [String: String]) throws {
        guard !options.users.isEmpty || !users.isEmpty else { return }
        let lines = users.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)\n" }.joined()
        try lines.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        // -U turns the plain user:password lines into salted hashes in place.
        try ChildProcess.run("/usr/bin/mosquitto_passwd", ["-U", passwordFile], in: directory)
    }

    /// The broker's log so far (for failure messages).
    public func log() -> String {
        (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
    }

    private func writeConfiguration() throws {
        var lines = [
            "per_listener_settings false",
            "log_dest file \(logFile)",
            "log_type error", "log_type warning", "log_type notice", "log_type information",
            "connection_messages true",
            // As deploy/mosquitto.conf: without it every request/answer round trip waits ~40 ms on delayed ACKs.
            "set_tcp_nodelay true",
            "listener \(port) 127.0.0.1",
        ]
        if geteuid() == 0 {
            // Started as root, mosquitto drops to user "mosquitto", which cannot read this private temp directory.
            lines.append("user root")
        }
        if let tlsPort, let certificates {
            let (certFile, keyFile) = switch options.serverCertificate {
            case .valid: (certificates.serverCertFile, certificates.serverKeyFile)
            case .wrongHost: (certificates.wrongHostCertFile, certificates.wrongHostKeyFile)
            case .expired: (certificates.expiredCertFile, certificates.expiredKeyFile)
            }
            lines += [
                "listener \(tlsPort) 127.0.0.1",
                "cafile \(certificates.caFile)",
                "certfile \(certFile)",
                "keyfile \(keyFile)",
                "require_certificate \(options.requireClientCertificate)",
            ]
        }
        if options.dynamicSecurity != nil {
            guard let plugin = Self.dynamicSecurityPlugin else {
                throw TestSupportError("mosquitto_dynamic_security.so not found (Debian's mosquitto package ships it)")
            }
            lines += ["plugin \(plugin)", "plugin_opt_config_file \(dynamicSecurityFile)"]
        }
        if options.users.isEmpty {
            lines.append(options.dynamicSecurity == nil ? "allow_anonymous true" : "allow_anonymous false")
        } else {
            lines += ["allow_anonymous false", "password_file \(passwordFile)"]
        }
        if options.persistence {
            lines += [
                "persistence true", "persistence_location \(directory)/", "persistence_file mosquitto.db",
                "autosave_interval 1",
            ]
        }
        lines.append(options.extraConfig)
        try lines.joined(separator: "\n").appending("\n").write(toFile: configFile, atomically: true, encoding: .utf8)
    }

    private func launch() async throws {
        // mosquitto logs "running" once every listener is open. Waiting for this start's line, and not only for the
        // ports to accept, makes sure the broker answering is this one: another process's broker on the same port
        // would accept too, while this one failed to bind and exited.
        let running = { self.log().components(separatedBy: " running").count }
        let runningBefore = running()
        let child = try ChildProcess.spawn(
            "/usr/sbin/mosquitto", ["-c", configFile], outputFile: directory + "/mosquitto.out")
        process.withLock { $0 = child }
        let ports = [port] + (tlsPort.map { [$0] } ?? [])
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        while running() <= runningBefore || !ports.allSatisfy(loopbackPortAccepts) {
            var status: Int32 = 0
            if waitpid(child.pid, &status, WNOHANG) == child.pid {
                process.withLock { $0 = nil }
                let output = (try? String(contentsOfFile: directory + "/mosquitto.out", encoding: .utf8)) ?? ""
                throw TestSupportError("mosquitto exited at start: \(output)\n\(log())")
            }
            if clock.now >= deadline {
                throw TestSupportError("mosquitto did not accept connections on \(ports) within 10 s\n\(log())")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Starts a broker, runs `body`, and always stops the broker, even when `body` throws.
public func withBroker<T>(
    _ options: MosquittoBroker.Options = .init(), _ body: (MosquittoBroker) async throws -> T
) async throws -> T {
    let broker = try await MosquittoBroker.start(options)
    do {
        let result = try await body(broker)
        broker.stop()
        return result
    } catch {
        broker.stop()
        throw error
    }
}
