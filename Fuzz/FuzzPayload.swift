// A libFuzzer target for the receive path's pure half: the strict JSON parser, the payload decoder for every
// topic kind, the cache rules that apply a decoded message to a device, and the device's trip through SQLite.
// Built and run by scripts/fuzz (not part of `swift build`): swiftc -sanitize=fuzzer,address against the
// library modules compiled with the same instrumentation and -enable-testing (PayloadDecoder is internal).
//
// Any crash, sanitizer report or broken invariant below is a finding; a finding's input is kept as a regression
// test in Tests/ThingAgentTests/FuzzFindingsTests.swift.

import JSON
@testable import ThingAgent

private let kinds: [InboundKind] = [.properties, .status, .signal, .info, .transferStatus, .unbind]
    + RequestKind.allCases.map { .response($0) }

/// One in-memory cache database for the whole run, emptied before each input.
nonisolated(unsafe) private let store = try! CacheStore(path: ":memory:")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    checkParser(bytes)
    for kind in kinds { checkDecoder(kind, bytes) }
    checkTopic(bytes)
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

/// A decoded message applies under the cache rules (a repeat changes nothing), and the device it makes comes back
/// from SQLite as it went in.
private func checkDecoder(_ kind: InboundKind, _ bytes: UnsafeRawBufferPointer) {
    let arrival: Millis = 1_764_450_000_000
    guard let message = try? PayloadDecoder().decode(kind, payload: bytes, arrival: arrival) else { return }
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
