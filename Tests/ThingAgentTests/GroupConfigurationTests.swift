import Foundation
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// `agentGroup` and `failoverTimeout`: from the file, the environment and flags, refused with the key named when
/// they cannot be used.
@Suite("Group configuration")
struct GroupConfigurationTests {
    @Test func withoutAGroupTheAPIIsTheClientIDsAndTheAgentActs() throws {
        var configuration = AgentConfiguration()
        configuration.mqtt.clientID = "agent-1"
        #expect(configuration.group.name == nil)
        #expect(configuration.group.failoverTimeout == .seconds(5))
        #expect(configuration.apiName == "agent-1")
    }

    @Test func theFileAndTheEnvironmentSetTheGroupAndItsTimeout() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/agent.json"
        try Data(#"{"clientId":"agent-1","agentGroup":"fleet_A-1","failoverTimeout":2.5}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        var configuration = AgentConfiguration()
        try configuration.apply(file: path)
        #expect(configuration.group.name == "fleet_A-1")
        #expect(configuration.group.failoverTimeout == .milliseconds(2500))
        #expect(configuration.apiName == "fleet_A-1")
        try configuration.apply(environment: ["THING_AGENT_GROUP": "other", "THING_AGENT_FAILOVER_TIMEOUT": "12"])
        #expect(configuration.group.name == "other")
        #expect(configuration.group.failoverTimeout == .seconds(12))
        try configuration.apply(key: "agentGroup", text: "", source: "--group-name")
        #expect(configuration.group.name == nil)
    }

    @Test(arguments: [("agentGroup", "a/b"), ("agentGroup", "a.b"), ("agentGroup", "a b"), ("agentGroup", "+"),
                      ("agentGroup", String(repeating: "g", count: 65)), ("failoverTimeout", "0.5"),
                      ("failoverTimeout", "601"), ("failoverTimeout", "soon")])
    func aValueThatCannotBeUsedIsRefusedNamingTheKey(key: String, text: String) throws {
        var configuration = AgentConfiguration()
        let error = #expect(throws: ConfigError.self) {
            try configuration.apply(key: key, text: text, source: "THING_AGENT_TEST")
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("\(key): invalid value"), "\(String(describing: error))")
    }

    @Test func aGroupWithProvisioningIsRefused() throws {
        var configuration = AgentConfiguration()
        configuration.group.name = "fleet"
        configuration.provisioning.enabled = true
        let error = #expect(throws: ConfigError.self) { try configuration.checkCombinations() }
        #expect("\(error.map { "\($0)" } ?? "")".contains("agentGroup and provisioning cannot both be on"))
    }
}
