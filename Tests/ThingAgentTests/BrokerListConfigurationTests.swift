import Foundation
import MQTT
import Testing
import TestSupport
@testable import ThingAgent

/// The key `broker` takes one URL or a list (a JSON list in the file, comma-separated in the environment and the
/// flag), and `mqttVersion` takes `auto`, the default.
@Suite("The broker list and the MQTT version in the configuration")
struct BrokerListConfigurationTests {
    static let list = ["mqtt://nats-1.example.net:1883", "mqtt://nats-2.example.net:1883",
                       "mqtt://nats-3.example.net:1883"]

    @Test func oneURLStillWorksAndTheDefaultsAreOneLocalBrokerAndAuto() throws {
        var configuration = AgentConfiguration()
        #expect(configuration.mqtt.brokers == ["mqtt://127.0.0.1:1883"])
        #expect(configuration.mqtt.version == .auto)
        try configuration.apply(contents: Array(#"{"broker": "mqtts://broker.example.net:8884"}"#.utf8), file: "a.json")
        #expect(configuration.mqtt.brokers == ["mqtts://broker.example.net:8884"])
        #expect(configuration.mqtt.broker == "mqtts://broker.example.net:8884")
        #expect(configuration.mqtt.connection(clientID: "x").brokers == ["mqtts://broker.example.net:8884"])
    }

    @Test func aListFromTheFileTheEnvironmentOrAFlag() throws {
        var file = AgentConfiguration()
        try file.apply(contents: Array(#"{"broker": ["mqtt://nats-1.example.net:1883", "mqtt://nats-2.example.net:1883", "mqtt://nats-3.example.net:1883"]}"#.utf8), file: "a.json")
        #expect(file.mqtt.brokers == Self.list)
        var commas = AgentConfiguration()
        try commas.apply(contents: Array(#"{"broker": "mqtt://nats-1.example.net:1883, mqtt://nats-2.example.net:1883,mqtt://nats-3.example.net:1883"}"#.utf8), file: "a.json")
        #expect(commas.mqtt.brokers == Self.list)
        var environment = AgentConfiguration()
        try environment.apply(environment: ["THING_AGENT_BROKER": Self.list.joined(separator: ",")])
        #expect(environment.mqtt.brokers == Self.list)
        var flag = AgentConfiguration()
        try flag.apply(key: "broker", text: Self.list.joined(separator: " , "), source: "--broker")
        #expect(flag.mqtt.brokers == Self.list)
        // What every connection of the agent and its commands is made from.
        #expect(flag.mqtt.connection(clientID: "x").brokers == Self.list)
        #expect(flag.mqtt.connection(clientID: "x").protocolVersion == .auto)
    }

    @Test func anEmptyListAnEmptyEntryOrATwiceNamedBrokerIsRefusedNamingTheKey() throws {
        for value in [#"[]"#, #""""#, #"["mqtt://a:1883", ""]"#, #"["mqtt://a:1883", 7]"#, #"" , mqtt://a:1883""#,
                      #"["mqtt://a:1883", "mqtt://a:1883"]"#] {
            var configuration = AgentConfiguration()
            #expect(throws: ConfigError.self, "\(value)") {
                try configuration.apply(contents: Array(#"{"broker": \#(value)}"#.utf8), file: "a.json")
            }
            do {
                try configuration.apply(contents: Array(#"{"broker": \#(value)}"#.utf8), file: "a.json")
            } catch {
                #expect("\(error)".contains("broker: invalid value"), "\(error)")
            }
        }
        var configuration = AgentConfiguration()
        #expect(throws: ConfigError.self) {
            try configuration.apply(environment: ["THING_AGENT_BROKER": "mqtt://a:1883,,mqtt://a:1883"])
        }
    }

    @Test func mqttVersionTakesAutoFiveAndThreeOneOne() throws {
        for (text, version) in [("auto", MQTTProtocolVersion.auto), ("5", .v5), ("3.1.1", .v311)] {
            var configuration = AgentConfiguration()
            try configuration.apply(environment: ["THING_AGENT_MQTT_VERSION": text])
            #expect(configuration.mqtt.version == version)
        }
        var configuration = AgentConfiguration()
        #expect(throws: ConfigError.self) { try configuration.apply(environment: ["THING_AGENT_MQTT_VERSION": "4"]) }
    }

    @Test func aPersistentSessionAsksForItsExpiryUnlessTheVersionIs311() {
        var configuration = AgentConfiguration()
        for (version, expiry) in [(MQTTProtocolVersion.auto, UInt32?(604_800)), (.v5, 604_800), (.v311, nil)] {
            configuration.mqtt.version = version
            #expect(Agent.mqttConfiguration(configuration, daemon: true).sessionExpiry == expiry)
        }
    }
}
