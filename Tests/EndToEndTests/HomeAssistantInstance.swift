import Foundation
import JSON
import TestSupport

/// A real Home Assistant (homeassistant 2025.4.4 and its frontend, pinned in Tests/Interop/homeassistant/
/// requirements.txt, in the venv `scripts/interop-homeassistant` prepares on Python 3.13), headless on a free
/// loopback port, onboarded and given its MQTT entry for the test's broker through its own REST and WebSocket APIs
/// (Tests/Interop/homeassistant/ha.py). What it shows is read back the same way.
final class HomeAssistantInstance: Sendable {
    let directory: String
    let port: Int
    let brokerPort: Int
    let python: String
    private let process = ProcessBox()

    /// The venv's python, prepared on first use (the first install builds wheels: minutes).
    static func python() async throws -> String {
        let result = try await runCommand(repositoryRoot() + "/scripts/interop-homeassistant", [],
                                          timeout: .seconds(1800))
        guard result.status == 0, let path = result.stdout.split(separator: "\n").last.map(String.init) else {
            throw TestSupportError("scripts/interop-homeassistant failed: \(result.stderr)")
        }
        return path
    }

    static let script = repositoryRoot() + "/Tests/Interop/homeassistant/ha.py"

    /// Configures, starts and onboards it, with its MQTT entry for `brokerPort`.
    static func start(directory: String, brokerPort: Int) async throws -> HomeAssistantInstance {
        let instance = HomeAssistantInstance(directory: directory, port: try freeLoopbackPort(), brokerPort: brokerPort,
                                             python: try await python())
        try await instance.helper(["configure", directory, "--port", "\(instance.port)"])
        let started = ContinuousClock.now
        try instance.launch()
        try await instance.helper(["onboard", directory, "--port", "\(instance.port)", "--broker-port", "\(brokerPort)"],
                                  timeout: .seconds(180))
        try await instance.helper(["wait", directory, "--port", "\(instance.port)"], timeout: .seconds(180))
        print("Home Assistant 2025.4.4 started, onboarded and given its MQTT entry in \(ContinuousClock.now - started)")
        return instance
    }

    private init(directory: String, port: Int, brokerPort: Int, python: String) {
        self.directory = directory
        self.port = port
        self.brokerPort = brokerPort
        self.python = python
    }

    private func launch() throws {
        let hass = URL(fileURLWithPath: python).deletingLastPathComponent().appendingPathComponent("hass").path
        process.set(try DaemonProcess(hass, ["-c", directory, "--skip-pip"], logPath: directory + "/hass.out"))
    }

    @discardableResult
    func helper(_ arguments: [String], timeout: Duration = .seconds(60)) async throws -> JSONValue {
        let result = try await runCommand(python, [Self.script] + arguments, timeout: timeout)
        guard result.status == 0 else {
            throw TestSupportError("ha.py \(arguments.first ?? "") failed: \(result.stderr)\nHome Assistant's log:\n"
                                   + log.suffix(4000))
        }
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? "null"
        return try JSONParser.parse(Array(line.utf8))
    }

    /// Home Assistant's log (its own file, `home-assistant.log` in its directory).
    var log: String { (try? String(contentsOfFile: directory + "/home-assistant.log", encoding: .utf8)) ?? "" }

    /// `{"devices","entities","states"}` of the MQTT integration.
    func dump() async throws -> HomeAssistantView { HomeAssistantView(try await helper(["dump", directory, "--port", "\(port)"])) }

    func call(_ domain: String, _ service: String, _ data: String) async throws {
        try await helper(["call", directory, "--port", "\(port)", domain, service, data])
    }

    /// Waits until what Home Assistant shows satisfies `condition`, and returns it; the last view in the error.
    @discardableResult
    func waitFor(_ what: String, timeout: Duration = .seconds(30),
                 _ condition: (HomeAssistantView) -> Bool) async throws -> HomeAssistantView {
        let deadline = ContinuousClock.now + timeout
        var last = try await dump()
        while !condition(last) {
            guard ContinuousClock.now < deadline else {
                throw TestSupportError("Home Assistant did not show \(what) within \(timeout); it shows:\n"
                                       + last.summary + "\nits log:\n" + log.suffix(3000))
            }
            try await Task.sleep(for: .milliseconds(250))
            last = try await dump()
        }
        return last
    }

    /// SIGTERM (Home Assistant stops and saves its registries), then a start on the same directory.
    func restart() async throws {
        try await stop()
        let started = ContinuousClock.now
        try launch()
        try await helper(["wait", directory, "--port", "\(port)"], timeout: .seconds(180))
        print("Home Assistant restarted in \(ContinuousClock.now - started)")
    }

    func stop() async throws {
        guard let running = process.get() else { return }
        running.signal(SIGTERM)
        if await running.waitForExit(timeout: .seconds(60)) == nil { running.signal(SIGKILL) }
        _ = await running.waitForExit(timeout: .seconds(10))
        process.set(nil)
    }

    /// Lines of Home Assistant's log at WARNING or ERROR that name MQTT or thing-agent's topics.
    var mqttComplaints: [String] {
        log.split(separator: "\n").map(String.init).filter { line in
            (line.contains(" WARNING ") || line.contains(" ERROR "))
                && (line.contains("mqtt") || line.contains("thing-agent") || line.contains("homeassistant/device"))
        }
    }
}

private final class ProcessBox: Sendable {
    private let lock = NSLock()
    nonisolated(unsafe) private var process: DaemonProcess?

    func set(_ value: DaemonProcess?) { lock.withLock { process = value } }
    func get() -> DaemonProcess? { lock.withLock { process } }
}

/// What Home Assistant shows of the MQTT integration: devices, entities and their states.
struct HomeAssistantView: Sendable {
    let devices: [JSONValue]
    let entities: [JSONValue]
    let states: [JSONValue]

    init(_ json: JSONValue) {
        devices = json["devices"]?.arrayValue ?? []
        entities = json["entities"]?.arrayValue ?? []
        states = json["states"]?.arrayValue ?? []
    }

    /// The Home Assistant device of an agent device (its identifier is `thing-agent/<id>`).
    func device(_ agentDevice: String) -> JSONValue? {
        devices.first { device in
            device["identifiers"]?.arrayValue?.contains { $0[1]?.stringValue == "thing-agent/\(agentDevice)" } ?? false
        }
    }

    /// The agent devices Home Assistant has.
    var agentDevices: [String] {
        devices.compactMap { device in
            device["identifiers"]?.arrayValue?.compactMap { $0[1]?.stringValue }.first { $0.hasPrefix("thing-agent/") }
                .map { String($0.dropFirst("thing-agent/".count)) }
        }.filter { !$0.hasPrefix("agent/") }
    }

    /// The entities of an agent device.
    func entities(of agentDevice: String) -> [JSONValue] {
        guard let id = device(agentDevice)?["id"]?.stringValue else { return [] }
        return entities.filter { $0["device_id"]?.stringValue == id }
    }

    /// The entity of an agent device with that unique id suffix (`bright_value`, `~light`).
    func entity(_ agentDevice: String, _ suffix: String) -> JSONValue? {
        entities.first { $0["unique_id"]?.stringValue == "thing-agent/\(agentDevice)/\(suffix)" }
    }

    func state(_ entityId: String?) -> JSONValue? {
        guard let entityId else { return nil }
        return states.first { $0["entity_id"]?.stringValue == entityId }
    }

    /// The state of an agent device's entity by unique id suffix.
    func state(_ agentDevice: String, _ suffix: String) -> JSONValue? {
        state(entity(agentDevice, suffix)?["entity_id"]?.stringValue)
    }

    var summary: String {
        devices.map { "device \($0["name"]?.stringValue ?? "?") \($0["identifiers"]?.serialized() ?? "")" }
            .joined(separator: "\n") + "\n"
            + states.map { "\($0["entity_id"]?.stringValue ?? "?") = \($0["state"]?.stringValue ?? "?")" }
            .joined(separator: "\n")
    }
}
