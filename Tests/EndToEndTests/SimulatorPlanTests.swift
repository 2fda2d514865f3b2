import Foundation
import JSON
import MQTT
import Testing
import TestSupport
import ThingAgent
@testable import thing_agent

/// The simulator's pure parts: its fleet plan, its connection plan, its refusals and its built-in models.
@Suite("Simulator plans")
struct SimulatorPlanTests {
    @Test func theBuiltInModelsAreTheShippedOnes() throws {
        let shipped = try ThingModels(directory: shippedModelsDirectory())
        let builtIn = try BuiltinModels.load(directory: nil)
        for product in [BuiltinModels.light, BuiltinModels.gateway, BuiltinModels.sensor, BuiltinModels.alinkLight,
                        BuiltinModels.alinkGateway, BuiltinModels.alinkSensor] {
            #expect(builtIn.model(for: product) == shipped.model(for: product), "\(product) differs from Config/models")
        }
    }

    @Test func theFleetFollowsTheSeed() {
        var options = SimulatorOptions()
        options.devices = 3
        options.gateways = 2
        options.subdevicesPerGateway = 2
        options.seed = 1
        let plan = FleetPlan.make(options)
        #expect(plan.count == 9)
        #expect(plan.map(\.category) == [.gateway, .subdevice, .subdevice, .gateway, .subdevice, .subdevice,
                                         .device, .device, .device])
        #expect(plan[1].gatewayId == plan[0].id && plan[4].gatewayId == plan[3].id)
        #expect(plan.map(\.id) == FleetPlan.make(options).map(\.id))
        #expect(plan.map(\.name) == FleetPlan.make(options).map(\.name))
        options.seed = 2
        #expect(Set(plan.map(\.id)).isDisjoint(with: FleetPlan.make(options).map(\.id)))
    }

    /// Regression: every value a simulated device reports is valid for its model (reports once carried nulls).
    @Test func reportedValuesAreValidForTheModel() throws {
        var options = SimulatorOptions()
        options.devices = 5
        options.gateways = 1
        options.subdevicesPerGateway = 2
        options.seed = 3
        let models = try BuiltinModels.load(directory: nil)
        for plan in FleetPlan.make(options) {
            let model = try #require(models.model(for: plan.productId))
            let device = VirtualDevice(plan: plan, model: model, topics: Topics(), seed: options.seed)
            var reports = [device.propertyReport(all: true, now: t0)].compactMap { $0 }
            for tick in 1...200 {
                if let report = device.propertyReport(all: false, now: t0 + Int64(tick), seconds: 5) { reports.append(report) }
            }
            for report in reports {
                let data = try #require(try JSONParser.parse(report.payload)["data"]?.objectValue)
                for (code, value) in data {
                    let spec = try #require(model.property(code), "\(plan.id) reported unknown \(code)")
                    #expect(!value.isNull, "\(plan.id) reported \(code) = null")
                    // Read-only values are checked by type and range as a set would be, as if writable.
                    var writable = spec
                    writable.access = .rw
                    #expect(throws: Never.self, "\(plan.id) reported \(code) = \(value.serialized())") {
                        try writable.validate(value)
                    }
                }
            }
        }
    }

    /// A value set by request stays: the simulated hand at the device changes other settings now and then, never
    /// one that was set (else a demo's `set` looked undone a few seconds later).
    @Test func aSetValueIsKeptWhileOtherSettingsWander() throws {
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 0
        options.seed = 7
        let models = try BuiltinModels.load(directory: nil)
        let plan = try #require(FleetPlan.make(options).first { $0.productId == BuiltinModels.light })
        let model = try #require(models.model(for: plan.productId))
        let device = VirtualDevice(plan: plan, model: model, topics: Topics(), seed: options.seed)
        let request = JSONValue.object(["msgId": "s1", "time": .integer(t0), "data": ["bright_value": 500]])
        let reaction = device.handle(.setProperties, payload: request.serializedBytes(), now: t0)
        #expect(try JSONParser.parse(reaction.publications[0].payload)["code"] == 0)
        var bright: [JSONValue] = []
        var others: Set<String> = []
        for tick in 1...2_000 {
            guard let report = device.propertyReport(all: false, now: t0 + Int64(tick), seconds: 5) else { continue }
            let data = try #require(try JSONParser.parse(report.payload)["data"]?.objectValue)
            for (code, value) in data {
                if code == "bright_value" { bright.append(value) } else if model.property(code)?.access == .rw {
                    others.insert(code)
                }
            }
        }
        #expect(bright.isEmpty, "bright_value moved after the set: \(bright)")
        #expect(!others.isEmpty, "no other setting ever changed: the test would prove nothing")
        let all = try #require(device.propertyReport(all: true, now: t0 + 3_000))
        #expect(try JSONParser.parse(all.payload)["data"]?["bright_value"] == 500)
    }

    @Test func connectionsAreOnePerDeviceUpToTheLimitThenPooled() {
        var options = SimulatorOptions()
        options.devices = 10
        options.gateways = 2
        options.subdevicesPerGateway = 3
        let small = ConnectionPlan(FleetPlan.make(options), maxConnections: 250)
        // Sub-devices ride on their gateway's connection.
        #expect(small.links.count == 12)
        #expect(small.links.allSatisfy { !$0.pooled })
        #expect(small.links[0].devices.count == 4)

        options.devices = 1000
        options.gateways = 0
        let large = ConnectionPlan(FleetPlan.make(options), maxConnections: 250)
        #expect(large.links.count <= 250)
        #expect(large.links.reduce(0) { $0 + $1.devices.count } == 1000)
        #expect(large.links.filter(\.pooled).allSatisfy { $0.devices.count <= ConnectionPlan.devicesPerPool })
        #expect(large.dedicatedCount + large.links.filter(\.pooled).count == large.links.count)
    }

    @Test func refusalsUseTheProtocolCodes() throws {
        let model = try #require(try BuiltinModels.load(directory: nil).model(for: BuiltinModels.light))
        #expect(SetRefusal.check(["bright_value": 500, "switch_1": true], model: model) == nil)
        #expect(SetRefusal.check([:], model: model)?.code == 1003)
        #expect(SetRefusal.check(["bright_value": "loud"], model: model)?.code == 1003)
        #expect(SetRefusal.check(["nosuch": 1], model: model)?.code == 1004)
        #expect(SetRefusal.check(["temp_current": 1], model: model)?.code == 1004)
        #expect(SetRefusal.check(["bright_value": 5], model: model)?.code == 1005)
        #expect(SetRefusal.check(["mode": "disco"], model: model)?.code == 1005)
        #expect(SetRefusal.check(["anything": 1], model: nil) == nil)
    }

    /// `--dialect native,alink` splits the gateways and the devices each in that order; a gateway's sub-devices speak
    /// its dialect; an Alink device is `<productKey>.<the native id>` of its Alink product, with no Wi-Fi scan or
    /// replacement ability.
    @Test func aMixedFleetIsSplitInTheOrderOfItsDialects() {
        var options = SimulatorOptions()
        options.devices = 4
        options.gateways = 2
        options.subdevicesPerGateway = 1
        options.seed = 7
        let native = FleetPlan.make(options)
        options.dialects = [.native, .alink]
        let mixed = FleetPlan.make(options)
        #expect(mixed.map(\.dialect) == [.native, .native, .alink, .alink, .native, .native, .alink, .alink])
        #expect(mixed.map(\.id) == [
            "gw-0dd7-1", "sub-0dd7-1-1", "a1Gateway1.gw-0dd7-2", "a1Sensor1.sub-0dd7-2-1",
            "dev-0dd7-1", "dev-0dd7-2", "a1Light1.dev-0dd7-3", "a1Light1.dev-0dd7-4",
        ])
        #expect(mixed[3].gatewayId == "a1Gateway1.gw-0dd7-2")
        #expect(mixed.filter { $0.dialect == .alink }.allSatisfy { $0.abilities.isEmpty && $0.productId.hasPrefix("a1") })
        // Names, addresses and versions are the seed's, whatever the dialect.
        #expect(mixed.map(\.name) == native.map(\.name))
        #expect(mixed.map(\.firmwareVersion) == native.map(\.firmwareVersion))
        options.dialects = [.alink]
        #expect(FleetPlan.make(options).allSatisfy { $0.dialect == .alink && $0.alink != nil })

        // Three dialects: a third each, in that order. A TuyaLink device is `tl-` before the native id (no dot: an
        // Alink id has one), of the native product, with no Wi-Fi scan or replacement ability.
        options.devices = 6
        options.gateways = 3
        options.dialects = [.native, .alink, .tuyalink]
        let three = FleetPlan.make(options)
        #expect(three.map(\.id) == [
            "gw-0dd7-1", "sub-0dd7-1-1", "a1Gateway1.gw-0dd7-2", "a1Sensor1.sub-0dd7-2-1", "tl-gw-0dd7-3",
            "tl-sub-0dd7-3-1", "dev-0dd7-1", "dev-0dd7-2", "a1Light1.dev-0dd7-3", "a1Light1.dev-0dd7-4",
            "tl-dev-0dd7-5", "tl-dev-0dd7-6",
        ])
        let tuyaLink = three.filter { $0.dialect == .tuyalink }
        #expect(tuyaLink.map(\.productId) == ["p-gateway-1", "p-sensor-1", "p-light-1", "p-light-1"])
        #expect(tuyaLink.allSatisfy { $0.abilities.isEmpty && !$0.id.contains(".") && DeviceID.isValid($0.id) })
        #expect(three[5].gatewayId == "tl-gw-0dd7-3")
        // The agent is given the products of the directly connected ones; a sub-device's comes with its bind.
        #expect(FleetPlan.deviceProducts(three)
                == ["tl-gw-0dd7-3": "p-gateway-1", "tl-dev-0dd7-5": "p-light-1", "tl-dev-0dd7-6": "p-light-1"])
        #expect(FleetPlan.deviceProducts(native).isEmpty)
    }

    /// The demo's fleet (scripts/demo) adds TuyaLink devices after the native and Alink ones it had: every id the
    /// native,alink fleet of the README had stays, and the new gateway and lights are TuyaLink's.
    @Test func theDemoFleetKeepsItsIdsAndAddsTuyaLinkDevices() {
        var options = SimulatorOptions()
        options.seed = 7
        options.subdevicesPerGateway = 3
        options.devices = 16
        options.gateways = 3
        options.dialects = [.native, .alink]
        let before = FleetPlan.make(options)
        options.devices = 24
        options.gateways = 4
        options.dialects = [.native, .alink, .tuyalink]
        let after = FleetPlan.make(options)
        #expect(Set(before.map(\.id)).isSubset(of: after.map(\.id)))
        let added = after.filter { !before.map(\.id).contains($0.id) }
        #expect(added.allSatisfy { $0.dialect == .tuyalink }, "\(added.map(\.id))")
        #expect(added.map(\.id).first == "tl-gw-0dd7-04" && added.contains { $0.id == "tl-dev-0dd7-17" })
        #expect(before.count == 28 && after.count == 40 && after.filter { SimulatedPairing.pairs($0) }.count == 28)
    }

    /// Everything a simulated Alink device and gateway send is what the agent's Alink dialect reads, as Linkkit
    /// sends it: posts with booleans as 0/1, the firmware version, an NTP request, events, upgrade progress, and the
    /// gateway's topology and sessions naming its sub-devices; posts owe a reply, and none carries a status.
    @Test func whatASimulatedAlinkDeviceSendsIsWhatTheAgentReads() throws {
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 1
        options.subdevicesPerGateway = 2
        options.dialects = [.alink]
        let models = try BuiltinModels.load(directory: nil)
        let devices = FleetPlan.make(options).map { plan in
            VirtualDevice(plan: plan, model: models.model(for: plan.productId), topics: Topics(), seed: 1)
        }
        let (gateway, subs, light) = (devices[0], [devices[1], devices[2]], devices[3])
        var sent = light.comingOnline(now: t0) + gateway.comingOnline(now: t0) + subs[0].comingOnline(now: t0)
        sent += [gateway.alinkTopoAdd(subs, now: t0), gateway.alinkLogin(subs, now: t0),
                 gateway.alinkLogin([subs[0]], now: t0), gateway.alinkLogout(subs), gateway.alinkLogout([subs[0]]),
                 light.alinkProgress(step: 50, desc: "downloading")]
        sent += (0..<200).compactMap { _ in light.event(chance: 0.5, now: t0) }
        #expect(light.signalReport(now: t0) == nil, "Alink has no signal report")
        #expect(!sent.contains { $0.retain || $0.topic.hasPrefix("things/") })
        let dialect = AlinkDialect()
        for publication in sent {
            let route = try #require(try dialect.route(publication.topic), "\(publication.topic) is not Alink's")
            let decoded = try publication.payload.withUnsafeBytes { try dialect.decode(route, payload: $0, arrival: t0) }
            if publication.topic.hasSuffix("/thing/event/property/post") {
                guard case .properties(let values) = decoded.message else { throw TestSupportError("\(decoded.message)") }
                let model = try #require(models.model(for: route.device.split(separator: ".").first.map(String.init) ?? ""))
                for (code, value) in values {
                    #expect(throws: Never.self, "\(code) = \(value.value)") {
                        var writable = try #require(model.property(code))
                        writable.access = .rw
                        try writable.validate(value.value)
                    }
                }
                #expect(decoded.replies.count == 1, "a post is owed its reply")
            }
            if case .batch(let messages) = decoded.message {
                #expect(Set(messages.map(\.device)).isSubset(of: subs.map(\.id)), "\(messages)")
            }
            if case .event(let event) = decoded.message {
                try Self.expectDescribed(event, by: models.model(for: "a1Light1"))
            }
        }
        for what in ["/thing/event/property/post", "/thing/event/fault/post", "/request", "/thing/topo/add",
                     "/combine/batch_login", "/combine/login", "/combine/logout", "/combine/batch_logout"] {
            #expect(sent.contains { $0.topic.hasSuffix(what) }, "nothing on \(what)")
        }
        #expect(sent.contains { $0.topic.hasPrefix("/ota/device/inform/") && $0.topic.hasSuffix(light.alinkNames.deviceName) })
        #expect(sent.contains { $0.topic.hasPrefix("/ota/device/progress/") })
    }

    /// A property set is answered 200 at once, as Linkkit does; the device then posts the values it applied (the
    /// ones its model takes), and a service it does not have goes unanswered.
    @Test func anAlinkSetIsAnswered200ThenTheAppliedValuesArePosted() throws {
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 0
        options.dialects = [.alink]
        let plan = try #require(FleetPlan.make(options).first)
        let model = try BuiltinModels.load(directory: nil).model(for: plan.productId)
        let light = VirtualDevice(plan: plan, model: model, topics: Topics(), seed: 1)
        let set = #"{"id":"42","version":"1.0","params":{"bright_value":500,"switch_1":1,"mode":7},"method":"thing.service.property.set"}"#
        let reaction = light.handleAlink(.propertySet, payload: Array(set.utf8), now: t0)
        #expect(reaction.publications.map(\.topic) == ["/sys/\(plan.alink!.productKey)/\(plan.alink!.deviceName)/thing/service/property/set_reply",
                                                       "/sys/\(plan.alink!.productKey)/\(plan.alink!.deviceName)/thing/event/property/post"])
        let reply = try JSONParser.parse(reaction.publications[0].payload)
        #expect(reply["id"] == "42" && reply["code"] == 200)
        let posted = try #require(try JSONParser.parse(reaction.publications[1].payload)["params"]?.objectValue)
        #expect(posted == ["bright_value": 500, "switch_1": 1], "mode 7 is outside its enum: not applied")
        #expect(light.value("bright_value") == 500)
        #expect(light.handleAlink(.service("reboot"), payload: Array(#"{"id":"1","params":{}}"#.utf8), now: t0)
            .publications.isEmpty)
        let identify = light.handleAlink(.service("identify"), payload: Array(#"{"id":"2","params":{"times":5}}"#.utf8), now: t0)
        #expect(try JSONParser.parse(try #require(identify.publications.first).payload)["data"]?["blinked"] == 5)
        // An upgrade push to a newer version starts it; one to an older version is reported as failed at once.
        let push = #"{"code":"1000","id":3,"message":"success","data":{"size":10,"version":"9.0.0","url":"http://x/y","sign":"ab","signMethod":"SHA256"}}"#
        #expect(light.handleAlink(.upgrade, payload: Array(push.utf8), now: t0).startUpgrade == "9.0.0")
        light.endUpgrade()
        let old = push.replacing("9.0.0", with: "0.0.1")
        let refused = light.handleAlink(.upgrade, payload: Array(old.utf8), now: t0)
        #expect(refused.startUpgrade == nil)
        #expect(try JSONParser.parse(try #require(refused.publications.first).payload)["params"]?["step"] == "-1")
    }

    @Test func alinkDownlinksAreParsedByTopic() {
        #expect(AlinkDownlink.parse("/sys/a1PK/d1/thing/service/property/set")! == ("a1PK.d1", .propertySet))
        #expect(AlinkDownlink.parse("/sys/a1PK/d1/thing/service/identify")! == ("a1PK.d1", .service("identify")))
        #expect(AlinkDownlink.parse("/sys/a1PK/d1/thing/service/identify_reply") == nil)
        #expect(AlinkDownlink.parse("/ota/device/upgrade/a1PK/d1")! == ("a1PK.d1", .upgrade))
        #expect(AlinkDownlink.parse("/sys/a1PK/d1/thing/event/property/post_reply")! == ("a1PK.d1", .reply))
        #expect(AlinkDownlink.parse("/ext/session/a1GW/g1/combine/batch_login_reply")! == ("a1GW.g1", .reply))
        #expect(AlinkDownlink.parse("/ext/ntp/a1PK/d1/response")! == ("a1PK.d1", .reply))
        #expect(AlinkDownlink.parse("things/d1/thing/properties/set") == nil)
    }

    /// A simulated TuyaLink fleet (a light, a gateway and two sensors).
    static func tuyaLinkFleet() throws -> (gateway: VirtualDevice, subs: [VirtualDevice], light: VirtualDevice,
                                           models: ThingModels) {
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 1
        options.subdevicesPerGateway = 2
        options.dialects = [.tuyalink]
        let models = try BuiltinModels.load(directory: nil)
        let devices = FleetPlan.make(options).map { plan in
            VirtualDevice(plan: plan, model: models.model(for: plan.productId), topics: Topics(), seed: 1)
        }
        return (devices[0], [devices[1], devices[2]], devices[3], models)
    }

    /// Everything a simulated TuyaLink device and gateway send is what the agent's TuyaLink dialect reads, as Tuya's
    /// SDK sends it: `{"msgId","time","data"}` with msgIds from "0" and times in seconds, QoS 0, nothing retained;
    /// reports `{"code":{"value","time"}}`, its firmware, a time request, events, upgrade progress, and the gateway's
    /// bind, login and logout naming its sub-devices, whose reports and events go every other time in its batch
    /// report.
    @Test func whatASimulatedTuyaLinkDeviceSendsIsWhatTheAgentReads() throws {
        let (gateway, subs, light, models) = try Self.tuyaLinkFleet()
        var sent = light.comingOnline(now: t0) + gateway.comingOnline(now: t0)
        sent += [gateway.tuyaLinkBind(subs, now: t0).publication, gateway.tuyaLinkLogin(subs.map(\.id), now: t0)]
        sent += subs[0].comingOnline(now: t0) + subs[1].comingOnline(now: t0)
        sent += [gateway.tuyaLinkLogout(subs.map(\.id), now: t0), light.tuyaLinkProgress(50, now: t0),
                 light.tuyaLinkProgress(-1, errorCode: "flash", now: t0)]
        for tick in 1...200 {
            for device in [light, gateway] + subs {
                if let report = device.propertyReport(all: false, now: t0 + Int64(tick) * 1000, seconds: 1) {
                    sent.append(report)
                }
                if let event = device.event(chance: 0.2, now: t0 + Int64(tick) * 1000) { sent.append(event) }
            }
        }
        #expect(light.signalReport(now: t0) == nil, "TuyaLink has no signal report")
        #expect(sent.allSatisfy { !$0.retain && $0.qos == .atMostOnce && $0.topic.hasPrefix("tylink/") })
        let dialect = TuyaLinkDialect(products: ["\(light.id)": light.plan.productId])
        var firstIds: [String: String] = [:]
        var batched = Set<String>(), ownReports = Set<String>(), events = Set<String>()
        for publication in sent {
            let route = try #require(try dialect.route(publication.topic), "\(publication.topic) is not TuyaLink's")
            let payload = try JSONParser.parse(publication.payload)
            let time = try #require(payload["time"]?.int64Value)
            #expect(time == t0 / 1000 || (t0 / 1000 ... t0 / 1000 + 200).contains(time), "time in seconds: \(time)")
            if firstIds[route.device] == nil { firstIds[route.device] = payload["msgId"]?.stringValue }
            let decoded = try publication.payload.withUnsafeBytes { try dialect.decode(route, payload: $0, arrival: t0) }
            switch decoded.message {
            case .properties(let values):
                let model = try #require(models.model(for: route.device == light.id ? BuiltinModels.light
                    : route.device == gateway.id ? BuiltinModels.gateway : BuiltinModels.sensor))
                for (code, value) in values {
                    var writable = try #require(model.property(code), "\(code)")
                    writable.access = .rw
                    #expect(throws: Never.self, "\(code) = \(value.value)") { try writable.validate(value.value) }
                    #expect(value.time % 1000 == 0, "a property's own time in seconds")
                }
                ownReports.insert(route.device)
            case .batch(let messages):
                let named = Set(messages.map(\.device))
                if publication.topic.hasSuffix("/thing/data/batch_report") {
                    #expect(named.isSubset(of: subs.map(\.id)) && route.device == gateway.id, "\(messages)")
                    batched.formUnion(named)
                    for message in messages {
                        if case .event(let event) = message.message {
                            try Self.expectDescribed(event, by: models.model(for: BuiltinModels.sensor))
                            events.insert(message.device)
                        }
                    }
                } else {
                    #expect(named == Set(subs.map(\.id)), "\(publication.topic) names every sub-device")
                }
            case .event(let event):
                try Self.expectDescribed(event, by: models.model(for: route.device == light.id ? BuiltinModels.light
                    : route.device == gateway.id ? BuiltinModels.gateway : BuiltinModels.sensor))
                events.insert(route.device)
                #expect(decoded.replies.count == 1, "an event is answered")
            default:
                break
            }
            if publication.topic.hasSuffix("/device/sub/bind") {
                // The platform's answer gives each its deviceId: its client id.
                let answer = try JSONParser.parse(try #require(decoded.replies.first).payload)
                #expect(answer["data"]?.arrayValue?.compactMap { $0["deviceId"]?.stringValue } == subs.map(\.id))
                #expect(answer["msgId"] == payload["msgId"])
            }
        }
        // Each counts its msgIds from "0"; the sub-devices report both ways; events come from everyone.
        #expect(firstIds[light.id] == "0" && firstIds[gateway.id] == "0", "\(firstIds)")
        #expect(batched == Set(subs.map(\.id)) && Set(subs.map(\.id)).isSubset(of: ownReports))
        #expect(events == Set([light.id, gateway.id] + subs.map(\.id)), "\(events)")
        for what in ["/thing/property/report", "/thing/event/trigger", "/thing/data/batch_report", "/ota/firmware/report",
                     "/ota/progress/report", "/ext/time/request", "/device/sub/bind", "/device/sub/login",
                     "/device/sub/logout"] {
            #expect(sent.contains { $0.topic.hasSuffix(what) }, "nothing on \(what)")
        }
        // The first full report asks for the platform's answer.
        let first = try #require(sent.first { $0.topic == "tylink/\(light.id)/thing/property/report" })
        #expect(try JSONParser.parse(first.payload)["sys"]?["ack"] == 1)
    }

    /// A set is answered on set_response with its msgId and no code, as Tuya's SDK does; the device then reports the
    /// values it applied (the ones its model takes); identify is answered on execute_response, another action not at
    /// all; an upgrade to a newer version starts, to an older one fails at once.
    @Test func aTuyaLinkSetIsAnsweredThenTheAppliedValuesAreReported() throws {
        let (_, subs, light, _) = try Self.tuyaLinkFleet()
        let set = #"{"msgId":"t42","time":1764450000,"data":{"bright_value":500,"switch_1":false,"mode":"disco"}}"#
        let reaction = light.handleTuyaLink(.propertySet, payload: Array(set.utf8), now: t0)
        #expect(reaction.publications.map(\.topic) == ["tylink/\(light.id)/thing/property/set_response",
                                                       "tylink/\(light.id)/thing/property/report"])
        let answer = try JSONParser.parse(reaction.publications[0].payload)
        #expect(answer["msgId"] == "t42" && answer["code"] == nil && answer["time"] == .integer(t0 / 1000), "\(answer)")
        let reported = try #require(try JSONParser.parse(reaction.publications[1].payload)["data"]?.objectValue)
        #expect(reported.keys.sorted() == ["bright_value", "switch_1"], "mode disco is not in its enum: not applied")
        #expect(reported["bright_value"]?["value"] == 500 && reported["switch_1"]?["value"] == false)
        #expect(light.value("bright_value") == 500)

        let execute = #"{"msgId":"t43","time":1764450000,"data":{"actionCode":"identify","inputParams":{"times":5}}}"#
        let identified = light.handleTuyaLink(.actionExecute, payload: Array(execute.utf8), now: t0)
        let output = try JSONParser.parse(try #require(identified.publications.first).payload)
        #expect(identified.publications.first?.topic == "tylink/\(light.id)/thing/action/execute_response")
        #expect(output["msgId"] == "t43" && output["data"]?["actionCode"] == "identify"
                && output["data"]?["outputParams"]?["blinked"] == 5, "\(output)")
        let reboot = execute.replacing("identify", with: "reboot")
        #expect(light.handleTuyaLink(.actionExecute, payload: Array(reboot.utf8), now: t0).publications.isEmpty)

        let issue = #"{"msgId":"t44","time":1764450000,"data":{"channel":0,"version":"9.0.0","url":"http://x/y","size":"10","sha256":"ab","upgradeType":0}}"#
        #expect(subs[0].handleTuyaLink(.otaIssue, payload: Array(issue.utf8), now: t0).startUpgrade == "9.0.0")
        subs[0].endUpgrade()
        let refused = subs[0].handleTuyaLink(.otaIssue, payload: Array(issue.replacing("9.0.0", with: "0.0.1").utf8), now: t0)
        #expect(refused.startUpgrade == nil)
        #expect(try JSONParser.parse(try #require(refused.publications.first).payload)["data"]?["progress"] == -1)

        // The answer to a gateway's bind hands over the ids it gave.
        let bound = #"{"msgId":"3","time":1764450000,"code":0,"data":[{"productId":"p","clientId":"a","deviceId":"a"}]}"#
        #expect(light.handleTuyaLink(.answer(.bind), payload: Array(bound.utf8), now: t0).bound! == ("3", ["a"]))
    }

    @Test func tuyaLinkDownlinksAreParsedByTopic() {
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/thing/property/set")! == ("tl-1", .propertySet))
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/thing/action/execute")! == ("tl-1", .actionExecute))
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/ota/issue")! == ("tl-1", .otaIssue))
        #expect(TuyaLinkDownlink.parse("tylink/gw/device/sub/bind_response")! == ("gw", .answer(.bind)))
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/thing/property/report_response")! == ("tl-1", .answer(.report)))
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/ext/time/response")! == ("tl-1", .answer(.timeRequest)))
        #expect(TuyaLinkDownlink.parse("tylink/tl-1/thing/property/report") == nil, "what a device publishes")
        #expect(TuyaLinkDownlink.parse("tylink/bad@id/thing/property/set") == nil)
        #expect(TuyaLinkDownlink.parse("things/tl-1/thing/properties/set") == nil)
    }

    /// A TuyaLink device connects as Tuya's SDK does: client id `tuyalink_<id>`, the signed user name, and the
    /// HMAC-SHA256 of `deviceId=…,timestamp=…,secureMode=1,accessType=1` keyed by its secret as password; MQTT 3.1.1,
    /// a clean session, no will; on the TuyaLink broker when one is given.
    @Test func aTuyaLinkDeviceSignsItsLoginAsTheSDKDoes() throws {
        // RFC 4231's test cases 1 and 2.
        #expect(Digest.hex(try Digest.hmacSHA256(key: [UInt8](repeating: 0x0B, count: 20), message: Array("Hi There".utf8)))
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(Digest.hex(try Digest.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 0
        options.dialects = [.tuyalink]
        options.tuyaLinkBrokers = ["mqtt://127.0.0.1:8885"]
        let plan = try #require(FleetPlan.make(options).first)
        var base = MQTTConfiguration(url: "mqtt://127.0.0.1:1883", clientID: "x")
        base.protocolVersion = .v5
        base.username = "thing-agent-cli"
        let mqtt = Simulator.tuyaLinkMQTT(base, plan, options: options)
        #expect(mqtt.clientID == "tuyalink_\(plan.id)")
        let user = try #require(mqtt.username)
        let prefix = "\(plan.id)|signMethod=hmacSha256,timestamp="
        #expect(user.hasPrefix(prefix) && user.hasSuffix(",secureMode=1,accessType=1"), "\(user)")
        let timestamp = user.dropFirst(prefix.count).prefix { $0.isNumber }
        #expect(timestamp.count == 10, "seconds")
        let secret = Simulator.tuyaLinkSecret(plan, seed: options.seed)
        #expect(secret.count == 16)
        let signed = "deviceId=\(plan.id),timestamp=\(timestamp),secureMode=1,accessType=1"
        #expect(mqtt.password == Digest.hex(try Digest.hmacSHA256(key: Array(secret.utf8), message: Array(signed.utf8))))
        #expect(mqtt.brokers == ["mqtt://127.0.0.1:8885"] && mqtt.protocolVersion == .v311 && mqtt.cleanSession
                && mqtt.will == nil)
    }

    /// An event's name and parameters are the ones its product's model describes.
    static func expectDescribed(_ event: ThingEvent, by model: ThingModel?) throws {
        let spec = try #require(model?.events?.first { $0.name == event.name }, "\(event.name) is not in the model")
        for (code, value) in event.params.objectValue ?? [:] {
            var output = try #require(spec.outputs.first { $0.code == code }, "\(code) is no output of \(event.name)")
            output.access = .rw
            #expect(throws: Never.self, "\(code) = \(value)") { try output.validate(value) }
        }
    }

    @Test func aSimulatedNativeDevicesEventIsOneItsModelDescribes() throws {
        var options = SimulatorOptions()
        options.devices = 1
        options.gateways = 1
        options.subdevicesPerGateway = 1
        let models = try BuiltinModels.load(directory: nil)
        let native = NativeDialect(topics: Topics())
        var heard = Set<String>()
        for plan in FleetPlan.make(options) {
            let device = VirtualDevice(plan: plan, model: models.model(for: plan.productId), topics: Topics(), seed: 2)
            for publication in (0..<50).compactMap({ _ in device.event(chance: 0.5, now: t0) }) {
                let route = try #require(try native.route(publication.topic), "\(publication.topic)")
                let decoded = try publication.payload.withUnsafeBytes { try native.decode(route, payload: $0, arrival: t0) }
                guard case .event(let event) = decoded.message else { throw TestSupportError("\(decoded.message)") }
                try Self.expectDescribed(event, by: models.model(for: plan.productId))
                heard.insert(event.name)
            }
        }
        #expect(heard == ["fault", "alarm", "button"], "each product's event")
    }
}
