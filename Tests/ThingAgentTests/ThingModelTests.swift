import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// docs/protocol.md's thing-model rules, one by one, on the pure validation logic; and the model file loader.
@Suite("Thing models")
struct ThingModelTests {
    let model: ThingModel

    init() throws {
        // The shipped light model with a stepped and a set-only property added (testLightModel).
        model = try ThingModels.parse(Array(try testLightModel().utf8), file: "test")
    }

    func broken(_ values: [String: JSONValue]) -> ValidationError? {
        do {
            try model.validate(values)
            return nil
        } catch {
            return error
        }
    }

    @Test func validValuesPass() throws {
        try model.validate(["switch_1": true, "bright_value": 10, "mode": "scene", "label": "", "colour_temp": 990,
                            "reset": true])
        try model.validate(["bright_value": 1000, "label": .string(String(repeating: "x", count: 32)), "colour_temp": 0])
    }

    @Test func unknownCodeIsRefused() {
        #expect(broken(["switch_2": true]) == ValidationError(code: "switch_2", rule: "unknown property for product p-light-1"))
    }

    @Test func wrongTypesAreRefused() {
        #expect(broken(["switch_1": 1])?.rule == "must be true or false (bool), got 1")
        #expect(broken(["switch_1": "true"])?.code == "switch_1")
        #expect(broken(["bright_value": "300"])?.rule == #"must be an integer (value), got "300""#)
        #expect(broken(["bright_value": 300.5])?.rule == "must be an integer (value), got 300.5")
        #expect(broken(["bright_value": .null])?.code == "bright_value")
        #expect(broken(["mode": 1])?.rule == "must be one of white, colour, scene (enum), got 1")
        #expect(broken(["label": 5])?.rule == "must be a string, got 5")
    }

    @Test func valuesOutOfRangeAreRefused() {
        #expect(broken(["bright_value": 9]) == ValidationError(code: "bright_value", rule: "9 is below the minimum 10"))
        #expect(broken(["bright_value": 1001]) == ValidationError(code: "bright_value", rule: "1001 is above the maximum 1000"))
        #expect(broken(["bright_value": .integer(.min)])?.rule.contains("below the minimum") == true)
    }

    @Test func valuesOffTheStepAreRefused() {
        #expect(broken(["colour_temp": 15]) == ValidationError(code: "colour_temp", rule: "15 is off the step 10 (from 0)"))
        #expect(broken(["colour_temp": 20]) == nil)
    }

    @Test func stepCountsFromMinWithoutOverflow() throws {
        let wide = PropertySpec(code: "w", kind: .value(min: .min, max: .max, step: 3), access: .rw)
        try wide.validate(.integer(.min + 3))
        try wide.validate(.integer(.max))   // max - min = 2^64 - 1, a multiple of 3
        #expect(throws: ValidationError.self) { try wide.validate(.integer(.max - 1)) }
    }

    @Test func enumValueNotInRangeIsRefused() {
        #expect(broken(["mode": "disco"]) == ValidationError(code: "mode", rule: "'disco' is not one of white, colour, scene"))
        #expect(broken(["mode": "White"])?.code == "mode")
    }

    @Test func stringLongerThanMaxlenInUTF8BytesIsRefused() {
        #expect(broken(["label": .string(String(repeating: "x", count: 33))])?.rule == "33 bytes is longer than maxlen 32")
        // 17 characters but 34 bytes: the limit is in UTF-8 bytes.
        #expect(broken(["label": .string(String(repeating: "é", count: 17))])?.rule == "34 bytes is longer than maxlen 32")
        #expect(broken(["label": .string(String(repeating: "é", count: 16))]) == nil)
    }

    @Test func readOnlyPropertyIsRefusedAndSetOnlyAllowed() {
        #expect(broken(["temp_current": 20]) == ValidationError(code: "temp_current", rule: "read-only (access ro)"))
        #expect(broken(["reset": true]) == nil)
    }

    @Test func firstBrokenRuleInCodeOrderIsReported() {
        #expect(broken(["switch_1": true, "bright_value": 2000, "mode": "disco"])?.code == "bright_value")
        #expect(ValidationError(code: "mode", rule: "x").description == "mode: x")
    }

    // MARK: loading

    func loadError(_ text: String) -> String? {
        do {
            _ = try ThingModels.parse(Array(text.utf8), file: "m.json")
            return nil
        } catch {
            return error.description
        }
    }

    @Test func badModelFilesAreErrorsNamingTheFileAndTheProblem() {
        #expect(loadError("{")?.hasPrefix("thing model m.json: not valid JSON") == true)
        #expect(loadError(#"{"properties":[]}"#) == "thing model m.json: needs a 'productId' string")
        #expect(loadError(#"{"productId":"p"}"#) == "thing model m.json: needs a 'properties' array")
        #expect(loadError(#"{"productId":"p","properties":[{"type":"bool"}]}"#)?.contains("needs a 'code'") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"float"}]}"#)?.contains("a: type must be") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"bool","access":"rx"}]}"#)?.contains("access") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"value","min":5,"max":1}]}"#)?.contains("min") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"value","min":0,"max":9,"step":0}]}"#)?.contains("step") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"enum","range":[]}]}"#)?.contains("range") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"enum","range":["x",1]}]}"#)?.contains("range") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"string"}]}"#)?.contains("maxlen") == true)
        #expect(loadError(#"{"productId":"p","properties":[{"code":"a","type":"bool"},{"code":"a","type":"bool"}]}"#)
                == "thing model m.json: a is listed twice")
    }

    @Test func directoryLoadingNamesTheBadFileAndRefusesDuplicateProducts() throws {
        let directory = try makeTemporaryDirectory("models")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let light = try shippedModel("p-light-1")
        try light.write(toFile: directory + "/a.json", atomically: true, encoding: .utf8)
        try "not a model".write(toFile: directory + "/README.txt", atomically: true, encoding: .utf8)
        #expect(try ThingModels(directory: directory).model(for: "p-light-1") != nil)

        try light.write(toFile: directory + "/b.json", atomically: true, encoding: .utf8)
        #expect(throws: ThingModels.LoadError(.thingModel, source: directory + "/b.json",
                                              "product p-light-1 is already defined by \(directory)/a.json")) {
            try ThingModels(directory: directory)
        }
        try #"{"productId":"#.write(toFile: directory + "/b.json", atomically: true, encoding: .utf8)
        #expect(throws: ThingModels.LoadError.self) { try ThingModels(directory: directory) }
        #expect(throws: ThingModels.LoadError(.thingModel, source: directory + "/missing", "cannot read the directory")) {
            try ThingModels(directory: directory + "/missing")
        }
    }

    @Test func aBadModelFileStopsTheAgentAtInitNamingTheFile() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/models", withIntermediateDirectories: true)
        try #"{"productId":"p","properties":[{"code":"a","type":"colour"}]}"#
            .write(toFile: directory + "/models/broken.json", atomically: true, encoding: .utf8)
        var configuration = AgentConfiguration()
        configuration.cache.database = directory + "/cache.sqlite"
        configuration.modelsDirectory = directory + "/models"
        #expect(throws: ThingModels.LoadError(.thingModel, source: directory + "/models/broken.json",
                                              "a: type must be bool, value, decimal, enum or string")) {
            try Agent(configuration: configuration)
        }
        configuration.modelsDirectory = shippedModelsDirectory()
        #expect(try Agent(configuration: configuration).models.byProduct.count == 7)
    }

    @Test func theShippedModelsLoad() throws {
        let models = try ThingModels(directory: shippedModelsDirectory())
        #expect(Set(models.byProduct.keys) == ["p-light-1", "p-plug-1", "p-gateway-1", "p-sensor-1",
                                               "a1Light1", "a1Gateway1", "a1Sensor1"])
        // The Alink products are TSL files: booleans are values 0 or 1, enums their keys.
        #expect(models.model(for: "a1Light1")?.property("switch_1")?.kind == .value(min: 0, max: 1, step: 1))
        #expect(models.model(for: "a1Light1")?.property("mode")?.kind == .value(min: 0, max: 2, step: 1))
        let light = try #require(models.model(for: "p-light-1"))
        #expect(light.property("bright_value")?.kind == .value(min: 10, max: 1000, step: 1))
        #expect(models.model(for: "p-plug-1")?.property("cur_power")?.access == .ro)
        #expect(models.model(for: "p-gateway-1")?.property("permit_join")?.access == .wo)
    }
}

/// The repository checkout this test file is in (for the example files under Config/).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path
