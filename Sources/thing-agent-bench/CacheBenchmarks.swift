import Foundation
import MQTT
import ThingAgent

/// A cache file with `count` devices (full info and three properties each), made through the agent's own receive
/// path and flushed to SQLite.
func makeCache(devices count: Int, at path: String) async throws {
    var configuration = AgentConfiguration()
    configuration.cache.database = path
    let agent = try Agent(configuration: configuration)
    let base: Int64 = 1_764_450_000_000
    for n in 0..<count {
        let id = "dev\(n)"
        let info = """
            {"time":\(base),"data":{"devId":"\(id)","name":"Device \(n)","productId":"p-light-1","category":"device",\
            "ip":"203.0.113.7","lanIp":"192.168.1.23","mac":"a4:c1:38:00:11:22","timezone":"+08:00","netStrength":"76%",\
            "wifiSignal":-58,"connectAbility":"gateway","gatewayId":"gw\(n % 100)","spaceId":1001,"firmwareVersion":"1.4.2",\
            "abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}}
            """
        agent.receive(MQTTMessage(topic: "things/\(id)/thing/info", payload: Array(info.utf8), qos: .atLeastOnce, retain: false))
        let properties = "{\"time\":\(base),\"data\":{\"switch_1\":true,\"bright_value\":\(n % 1000),\"mode\":\"white\"}}"
        agent.receive(MQTTMessage(topic: "things/\(id)/thing/properties", payload: Array(properties.utf8),
                                  qos: .atLeastOnce, retain: false))
    }
    await agent.stop()
}

/// `deviceInfo` in process: nanoseconds per call over many random known ids.
func deviceInfoNanoseconds(cache path: String, devices: Int, calls: Int = 2_000_000) async throws -> Double {
    var configuration = AgentConfiguration()
    configuration.cache.database = path
    let agent = try Agent(configuration: configuration, role: .observer)
    let managers = (0..<1000).map { DeviceInfoManager(deviceId: "dev\(($0 * 7919) % devices)", agent: agent) }
    var found = 0
    let seconds = await Measure.seconds {
        for n in 0..<calls where managers[n % managers.count].deviceInfo != nil { found += 1 }
    }
    precondition(found == calls, "every device must be known")
    return seconds / Double(calls) * 1e9
}

/// The whole `thing-agent info DEVICE` process (start, open the cache, read one device, print, exit), median of runs.
func infoProcessMilliseconds(executable: String, cache path: String, devices: Int, runs: Int = 30) throws -> (Double, Double) {
    var times: [Double] = []
    for n in 0..<runs {
        let id = "dev\((n * 7919) % devices)"
        let start = ContinuousClock.now
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["info", id, "--db", path, "--json"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        waitForExit(process)
        let elapsed = ContinuousClock.now - start
        guard process.terminationStatus == 0 else { throw BenchError("info \(id) exited \(process.terminationStatus)") }
        times.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
    }
    let sorted = times.sorted()
    return (Measure.percentile(sorted, 50), Measure.percentile(sorted, 90))
}

/// Restart to ready, in a fresh process: open the cache, load every device, answer a read. Prints seconds and MiB.
func loadProbe(cache path: String) throws {
    let start = ContinuousClock.now
    var configuration = AgentConfiguration()
    configuration.cache.database = path
    let agent = try Agent(configuration: configuration, role: .observer)
    guard agent.cache.device("dev0")?.info.name != nil else { throw BenchError("dev0 not loaded") }
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    print("ready \(seconds) rss \(Measure.residentMiB()) devices \(agent.cache.count)")
}

/// Runs `loadProbe` in a child process (so the figures are not those of the process that built the cache).
func restartToReady(benchExecutable: String, cache path: String) async throws -> (seconds: Double, rssMiB: Double) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: benchExecutable)
    process.arguments = ["--load-probe", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let fields = output.split(separator: " ")
    guard fields.count >= 4, let seconds = Double(fields[1]), let rss = Double(fields[3]) else {
        throw BenchError("load probe said: \(output)")
    }
    return (seconds, rss)
}

/// Waits for a timed process, noticing its exit within 0.2 ms: `waitUntilExit` runs the thread's run loop, and once
/// anything had put a source on it, it noticed the exit only at its next 50 ms turn (the `info` p50 read 51 ms).
func waitForExit(_ process: Process) {
    while process.isRunning { usleep(200) }
}
