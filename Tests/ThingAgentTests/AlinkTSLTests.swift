import JSON
import Testing
import TestSupport
@testable import ThingAgentCore

/// Thing models from Alink TSL files (Tests/Interop/linkkit/a1PK.tsl.json, as Alibaba's platform exports one):
/// read beside the agent's own, each type mapped, sets checked against it.
@Suite("Alink TSL thing models")
struct AlinkTSLTests {
    static let file = TestSupport.repositoryRoot() + "/Tests/Interop/linkkit/a1PK.tsl.json"

    @Test func aTSLFileIsAModelOfItsProductKey() throws {
        let model = try ThingModels.parse(try ConfigFile.bytes(Self.file, .thingModel), file: Self.file)
        #expect(model.productId == "a1PK")
        #expect(model.property("switch_1")?.kind == .value(min: 0, max: 1, step: 1), "booleans are 0/1 on the wire")
        #expect(model.property("bright")?.kind == .value(min: 0, max: 100, step: 1))
        #expect(model.property("temp")?.kind == .decimal(min: -40, max: 120, step: 0.1))
        #expect(model.property("temp")?.access == .ro)
        #expect(model.property("mode")?.kind == .value(min: 0, max: 2, step: 1))
        #expect(model.property("label")?.kind == .string(maxlen: 32))
        #expect(model.property("location") == nil, "a struct is left out")
    }

    @Test func setsAreCheckedAgainstIt() throws {
        let model = try ThingModels.parse(try ConfigFile.bytes(Self.file, .thingModel), file: Self.file)
        #expect(throws: Never.self) { try model.validate(["switch_1": 1, "bright": 70, "mode": 2]) }
        #expect(throws: ValidationError.self) { try model.validate(["bright": 101]) }
        #expect(throws: ValidationError.self) { try model.validate(["switch_1": true]) }
        #expect(throws: ValidationError.self) { try model.validate(["temp": 20.5]) }
        let writable = PropertySpec(code: "t", kind: .decimal(min: -40, max: 120, step: 0.1), access: .rw)
        #expect(throws: Never.self) { try writable.validate(20.3) }
        #expect(throws: ValidationError.self) { try writable.validate(20.35) }
        #expect(throws: ValidationError.self) { try writable.validate("20") }
    }

    @Test func aBrokenTSLIsAnErrorNamingTheFileAndProperty() throws {
        let broken = #"{"profile":{"productKey":"a1X"},"properties":[{"identifier":"b","dataType":{"type":"int","specs":{"min":"5","max":"1"}}}]}"#
        #expect(throws: ConfigError.self) { try ThingModels.parse(Array(broken.utf8), file: "a1X.json") }
        do {
            _ = try ThingModels.parse(Array(broken.utf8), file: "a1X.json")
        } catch {
            #expect(error.description.contains("a1X.json") && error.description.contains("b:"), "\(error)")
        }
    }

    @Test func servicesAreActionsAndEventsAreEventsWithTheirParameters() throws {
        let model = try ThingModels.parse(try ConfigFile.bytes(Self.file, .thingModel), file: Self.file)
        #expect(model.actions?.map(\.name) == ["reboot"], "the property service 'set' is left out")
        #expect(model.actions?.first?.inputs == [PropertySpec(code: "delay", kind: .value(min: 0, max: 60, step: 1), access: .rw,
                                                              name: "Delay", unit: "s")])
        #expect(model.actions?.first?.outputs == ["echo"])
        #expect(model.events?.map(\.name) == ["alarm"], "the property post is left out")
        #expect(throws: Never.self) { try model.validateAction("reboot", params: ["delay": 5]) }
        #expect(throws: Never.self) { try model.validateAction("reboot", params: [:]) }
        #expect(throws: ValidationError.self) { try model.validateAction("reboot", params: ["delay": 61]) }
        #expect(throws: ValidationError.self) { try model.validateAction("reboot", params: ["when": 1]) }
        #expect(throws: ValidationError.self) { try model.validateAction("explode", params: [:]) }
    }

    @Test func theAgentsOwnModelsDescribeActionsAndEventsToo() throws {
        let own = #"""
            {"productId":"p-btn","properties":[{"code":"switch_1","type":"bool"}],
             "actions":[{"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
                         "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}],
             "events":[{"code":"pressed","outputParams":[{"code":"count","type":"value","min":1,"max":9}]}]}
            """#
        let model = try ThingModels.parse(Array(own.utf8), file: "p-btn.json")
        #expect(model.actions == [ActionSpec(name: "identify", inputs: [
            PropertySpec(code: "times", kind: .value(min: 1, max: 20, step: nil), access: .rw)], outputs: ["blinked"])])
        #expect(model.events?.first?.name == "pressed" && model.events?.first?.outputs.first?.code == "count")
        #expect(throws: ValidationError.self) { try model.validateAction("identify", params: ["times": "5"]) }
        let silent = try ThingModels.parse(Array(#"{"productId":"p","properties":[]}"#.utf8), file: "p.json")
        #expect(silent.actions == nil, "a model that says nothing of actions checks none")
        #expect(throws: Never.self) { try silent.validateAction("anything", params: ["x": 1]) }
        for bad in [#"{"productId":"p","properties":[],"actions":[{"code":"a b"}]}"#,
                    #"{"productId":"p","properties":[],"actions":[{"code":"a"},{"code":"a"}]}"#,
                    #"{"productId":"p","properties":[],"events":{"code":"a"}}"#,
                    #"{"productId":"p","properties":[],"actions":[{"code":"a","inputParams":[{"code":"x","type":"nope"}]}]}"#] {
            #expect(throws: ConfigError.self, "\(bad)") { try ThingModels.parse(Array(bad.utf8), file: "p.json") }
        }
        for file in ["p-light-1", "p-plug-1", "p-sensor-1", "p-gateway-1"] {
            let path = TestSupport.repositoryRoot() + "/Config/models/\(file).json"
            let shipped = try ThingModels.parse(try ConfigFile.bytes(path, .thingModel), file: path)
            #expect(shipped.actions?.map(\.name) == ["identify"], "the simulator's action, in \(file)")
        }
    }
}
