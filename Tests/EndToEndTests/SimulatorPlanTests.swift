import Foundation
import JSON
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
        for product in [BuiltinModels.light, BuiltinModels.gateway, BuiltinModels.sensor] {
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
}
