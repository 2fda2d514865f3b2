import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The five files the agent is configured with fail in the same words: the kind of file and its path, the key or
/// entry, the reason.
@Suite("Configuration file errors")
struct ConfigErrorTests {
    /// Each loader, by what its errors start with.
    static let loaders: [(kind: String, load: @Sendable (String) throws -> Void)] = [
        ("config file", { var configuration = AgentConfiguration(); try configuration.apply(file: $0) }),
        ("detail config", { _ = try DetailConfig(file: $0) }),
        ("firmware catalog", { _ = try FirmwareCatalog(file: $0) }),
        ("scenes file", { _ = try Scenes(file: $0) }),
        ("thing model", { path in
            // A models directory holding the file.
            let directory = (path as NSString).deletingLastPathComponent
            _ = try ThingModels(directory: directory)
        }),
    ]

    static func message(_ load: (String) throws -> Void, _ path: String) -> String? {
        do {
            try load(path)
            return nil
        } catch {
            #expect(error is ConfigError, "\(type(of: error)) is not the one configuration error")
            return "\(error)"
        }
    }

    @Test func aMissingFileAndBrokenJSONAreSaidTheSameWayForEveryFile() throws {
        for (kind, load) in Self.loaders {
            // As the loaders name it (the thing models' from the directory they list).
            let directory = URL(fileURLWithPath: try makeTemporaryDirectory()).standardizedFileURL.path
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let path = directory + "/file.json"
            if kind != "thing model" {
                #expect(Self.message(load, path)?.hasPrefix("\(kind) \(path): cannot read it") == true,
                        "\(Self.message(load, path) ?? "no error")")
            }
            try "{\"a\": ".write(toFile: path, atomically: true, encoding: .utf8)
            #expect(Self.message(load, path)?.hasPrefix("\(kind) \(path): not valid JSON: ") == true,
                    "\(Self.message(load, path) ?? "no error")")
        }
    }

    @Test func anErrorInsideAFileNamesTheFileTheKeyAndTheReason() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cases: [(String, @Sendable (String) throws -> Void, String)] = [
            (#"{"keepAlive": "often"}"#, Self.loaders[0].load, #"config file FILE: keepAlive: invalid value "often""#),
            (#"{"brokr": "mqtt://x"}"#, Self.loaders[0].load, "config file FILE: brokr: unknown key"),
            (#"{"p-light-1": {"version": "1.5.0"}}"#, Self.loaders[2].load, "firmware catalog FILE: product 'p-light-1': "),
            (#"{"scenes": [{"name": "a"}]}"#, Self.loaders[3].load, "scenes file FILE: scene 'a' needs"),
            (#"[{"nme": "x"}]"#, Self.loaders[1].load, "detail config FILE: section 0"),
        ]
        for (text, load, expected) in cases {
            let path = directory + "/file.json"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let message = Self.message(load, path)
            #expect(message?.hasPrefix(expected.replacingOccurrences(of: "FILE", with: path)) == true,
                    "\(message ?? "no error") for \(text)")
        }
        // An environment variable or flag: the variable and the key.
        var configuration = AgentConfiguration()
        #expect(throws: ConfigError(.setting, source: "THING_AGENT_KEEPALIVE", key: "keepAlive", "invalid value 'x'")) {
            try configuration.apply(environment: ["THING_AGENT_KEEPALIVE": "x"])
        }
    }
}
