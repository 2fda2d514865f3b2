// A libFuzzer target for the receive path's pure half: the strict JSON parser, the payload decoder for every
// topic kind, the cache rules that apply a decoded message to a device, and the device's trip through SQLite;
// and for what else comes from outside: the config file (every setting it takes turned into what the agent
// builds from it) and the API's requests (their numbers, pages and reply topics).
// Built and run by scripts/fuzz (not part of `swift build`): swiftc -sanitize=fuzzer,address against the
// library modules compiled with the same instrumentation and -enable-testing (PayloadDecoder is internal).
//
// Any crash, sanitizer report or broken invariant below is a finding; a finding's input is kept as a regression
// test in Tests/ThingAgentTests/FuzzFindingsTests.swift.

import Foundation
import JSON
import MQTT
@testable import ThingAgent
@testable import ThingAgentCore

private let kinds: [InboundKind] = [.properties, .status, .signal, .info, .transferStatus, .otaProgress, .event, .unbind]
    + RequestKind.allCases.map { .response($0) }

/// One in-memory cache database for the whole run, emptied before each input.
nonisolated(unsafe) private let store = try! CacheStore(path: ":memory:")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    checkParser(bytes)
    for kind in kinds { checkDecoder(kind, bytes) }
    for (dialect, route) in dialectRoutes { checkDialect(dialect, route, bytes) }
    checkTopic(bytes)
    checkConfig(bytes)
    checkAPIRequest(bytes)
    return 0
}

/// Whatever parses serializes to text that parses back to the same value, at every depth limit.
private func checkParser(_ bytes: UnsafeRawBufferPointer) {
    for depth in [0, 1, PayloadDecoder.maxDepth, JSONParser.defaultMaxDepth] {
        guard let value = try? JSONParser.parse(bytes, maxDepth: depth) else { continue }
        let text = value.serializedBytes()
        guard let again = try? JSONParser.parse(text, maxDepth: depth) else {
            fatalError("serialized JSON does not parse back: \(String(decoding: text, as: UTF8.self))")
        }
        guard again == value else { fatalError("JSON round trip changed \(value) into \(again)") }
        _ = value.prettyPrinted(sortedKeys: true)
    }
}

/// Every topic of the vendor dialects a device publishes, routed for device `fz` (`fz.fz` in Alink).
private let dialectRoutes: [(any Dialect, DialectRoute)] = {
    var routes: [(any Dialect, DialectRoute)] = []
    let tuya = TuyaLinkDialect(products: ["fz": "p"])
    for topic in TuyaLinkDialect.Topic.allCases {
        routes.append((tuya, try! tuya.route("tylink/fz/" + topic.suffix)!))
    }
    let alink = AlinkDialect()
    for filter in AlinkTopics.everyDevice(.device) {
        let topic = filter.replacing("/+/+/", with: "/fz/fz/").replacing("/+/+", with: "/fz/fz")
            .replacing("/+/", with: "/property/")
        if let route = try? alink.route(topic) { routes.append((alink, route)) }
    }
    return routes
}()

/// A vendor dialect's message decodes or is refused, never traps; every answer it owes is JSON (Tuya's SDK crashes
/// on one that is not) and, for TuyaLink, of a size the SDK takes when the message asked for little; each message
/// for one device then meets the cache rules as a native one does.
private func checkDialect(_ dialect: any Dialect, _ route: DialectRoute, _ bytes: UnsafeRawBufferPointer) {
    guard let decoded = try? dialect.decode(route, payload: bytes, arrival: 1_764_450_000_000) else { return }
    for reply in decoded.replies where (try? JSONParser.parse(reply.payload)) == nil {
        fatalError("\(dialect.name) answered \(route.topic) with a payload that is not JSON")
    }
    if case .batch = decoded.message { return }
    checkDecoder(route.kind, bytes) { _ in decoded.message }
}

/// A decoded message applies under the cache rules (a repeat changes nothing), and the device it makes comes back
/// from SQLite as it went in.
private func checkDecoder(_ kind: InboundKind, _ bytes: UnsafeRawBufferPointer,
                          decode: ((Millis) -> InboundMessage?)? = nil) {
    let arrival: Millis = 1_764_450_000_000
    let decoded = decode.map { $0(arrival) } ?? (try? PayloadDecoder().decode(kind, payload: bytes, arrival: arrival))
    guard let message = decoded else { return }
    var device = DeviceSnapshot(id: "fz", seenAt: arrival)
    // An earlier state for the message to meet: some info, a status, a signal, a property.
    _ = try? device.apply(.info(["name": "n", "spaceId": 1], time: arrival - 10), now: arrival)
    _ = try? device.apply(.status(online: true, time: arrival - 10), now: arrival)
    _ = try? device.apply(.signal(wifi: SignalReading(dBm: -50, time: arrival - 10), rsrp: nil), now: arrival)
    _ = try? device.apply(.properties([("switch_1", PropertyValue(value: true, time: arrival - 10))]), now: arrival)

    let changes: AppliedChanges
    do {
        changes = try device.apply(message, now: arrival + 1)
    } catch {
        return  // refused (an info field of the wrong type): checked to leave the device as it was by the unit tests
    }
    let afterFirst = device
    guard let repeated = try? device.apply(message, now: arrival + 2) else {
        fatalError("a message applied once was refused the second time: \(message)")
    }
    guard repeated.isEmpty, device == afterFirst else {
        fatalError("a repeated message changed the device again: \(message), \(repeated)")
    }
    _ = changes.events(for: device)

    do {
        try store.database.execute("DELETE FROM properties; DELETE FROM transfers; DELETE FROM devices")
        try store.write(device, row: true, properties: device.properties.keys, transfer: true)
        guard let loaded = try store.loadDevice(device.id) else { fatalError("the device was not written") }
        // What readers see (`info --json`: every field, null where unknown) is the same after the trip.
        let before = device.json(now: arrival + 3), after = loaded.json(now: arrival + 3)
        guard before == after else {
            fatalError("SQLite changed the device:\n\(before)\n\(after)")
        }
    } catch {
        fatalError("SQLite refused a device the cache accepted: \(error)")
    }
}

/// The topic parser and the device-id rule take any text.
private func checkTopic(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let (device, _) = try? Topics().parse(text), !DeviceID.isValid(device) {
        fatalError("a topic parsed with an invalid device id: \(device)")
    }
}

/// A config file either fails with an error naming the problem, or gives settings from which the agent builds its
/// MQTT configuration, timers and limits without a trap.
private func checkConfig(_ bytes: UnsafeRawBufferPointer) {
    var configuration = AgentConfiguration()
    do {
        try configuration.apply(contents: Array(bytes), file: "fuzz.json")
    } catch {
        guard !error.reason.isEmpty else { fatalError("a config error without a reason") }
        return
    }
    _ = Agent.mqttConfiguration(configuration, daemon: true)
    _ = Agent.mqttConfiguration(configuration, daemon: false)
    // Every time the file may set, in milliseconds as the agent uses them: a value the bounds let through that
    // traps here would trap in the agent.
    for seconds in [configuration.mqtt.sessionExpiry, configuration.mqtt.keepAlive, configuration.cache.maxClockSkew] {
        _ = Duration.milliseconds(Int64((seconds * 1000).rounded()))
    }
    for duration in [configuration.cache.flushInterval, configuration.requestTimeout, configuration.offlineGracePeriod,
                     configuration.mqtt.reconnectMinDelay, configuration.mqtt.reconnectMaxDelay,
                     configuration.transferStallTimeout] {
        let (whole, fraction) = duration.components
        _ = whole * 1000 + fraction / 1_000_000_000_000_000
    }
    _ = IngestLimits(configuration)
    _ = APIRateLimiter(rate: configuration.api.rateLimit).allow("c", now: .now)
}

/// An agent with no broker and no file, holding a few devices, for the API's synchronous half.
nonisolated(unsafe) private let apiAgent: Agent = {
    var configuration = AgentConfiguration()
    configuration.cache.database = "/nonexistent/fuzz.sqlite"
    configuration.api.pageSize = 2
    let agent = try! Agent(configuration: configuration, role: .observer)
    for id in ["a", "b", "c", "d"] {
        agent.receive(MQTTMessage(topic: "things/\(id)/thing/status", payload: Array(#"{"status":"online"}"#.utf8)))
    }
    return agent
}()

/// An API request's numbers and strings give an answer or an `APIError` (400), never a trap: its timeout, a
/// page of `devices` (never more than asked, in id order, after `after`), its reply topic.
private func checkAPIRequest(_ bytes: UnsafeRawBufferPointer) {
    guard let request = (try? JSONParser.parse(bytes))?.objectValue else { return }
    do {
        if let timeout = try Agent.timeout(request["timeout"]) {
            guard timeout > .zero else { fatalError("a timeout of \(timeout) was taken") }
        }
    } catch {
        guard error is APIError else { fatalError("the timeout failed with \(error)") }
    }
    do {
        let (page, extra) = try apiAgent.devicesPage(request, now: 1_764_450_000_000)
        let ids = page.arrayValue?.compactMap { $0["devId"]?.stringValue } ?? []
        let limit = request["limit"]?.int64Value.map(Int.init) ?? apiAgent.configuration.api.pageSize
        guard ids.count <= limit, ids == ids.sorted() else { fatalError("a bad page \(ids) for \(request)") }
        if let after = request["after"]?.stringValue, let first = ids.first, first <= after {
            fatalError("a page starting at \(first), not after \(after)")
        }
        _ = extra
    } catch {
        guard error is APIError else { fatalError("devices failed with \(error)") }
    }
    if let replyTo = request["replyTo"]?.stringValue,
       let client = ReplyTopics.client(of: replyTo, prefix: "thing-agent/replies/") {
        guard replyTo.hasPrefix("thing-agent/replies/\(client)"), !client.contains("/") else {
            fatalError("reply topic \(replyTo) taken for client \(client)")
        }
    }
}
