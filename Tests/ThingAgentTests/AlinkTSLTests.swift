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
}
