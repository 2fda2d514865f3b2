// swift-tools-version:6.0
import PackageDescription

let swift6: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "thing-agent",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ThingAgent", targets: ["ThingAgent"]),
        .library(name: "MQTT", targets: ["MQTT"]),
        .library(name: "SQLite", targets: ["SQLite"]),
        .executable(name: "thing-agent", targets: ["thing-agent"]),
    ],
    targets: [
        // C libraries from Debian's -dev packages.
        // libmosquitto's and OpenSSL's headers (libmosquitto-dev, libssl-dev), the libraries loaded when first
        // needed (Sources/CLazyLibraries/include/CLazyLibraries.h), not linked: a short command starts without them.
        .target(name: "CLazyLibraries"),
        .systemLibrary(
            // Headers only: HTTPEndpoint loads the library when a server starts (HTTPEndpoint/MicroHTTPD.swift).
            name: "CMicroHTTPD",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),

        // Swift layers: each points only down.
        // What the shipped modules would otherwise take from Foundation's whole library, which brings ICU (and its
        // start-up cost) into every process: threads, whole files, blanks, fixed-point numbers. The shipped modules
        // import FoundationEssentials only.
        .target(name: "Platform", swiftSettings: swift6),
        .target(name: "JSON", swiftSettings: swift6),
        .target(name: "MQTT", dependencies: ["CLazyLibraries", "Platform"], swiftSettings: swift6),
        .target(name: "SQLite", dependencies: ["CSQLite"], swiftSettings: swift6),
        .target(name: "HTTPEndpoint", dependencies: ["CMicroHTTPD"], swiftSettings: swift6),
        // The agent's lower layers: protocol, model, cache, events, thing models, requests, support. They cannot
        // import the service, the API or the fleet features above them.
        .target(name: "ThingAgentCore", dependencies: ["SQLite", "JSON", "Platform"], swiftSettings: swift6),
        .target(name: "ThingAgent",
                dependencies: ["ThingAgentCore", "MQTT", "SQLite", "JSON", "HTTPEndpoint", "CLazyLibraries", "Platform"],
                swiftSettings: swift6),
        .executableTarget(name: "thing-agent", dependencies: ["ThingAgent", "MQTT", "JSON", "Platform"], swiftSettings: swift6),
        // Benchmarks, all of them: a release-built executable that prints figures (README, "Performance"), with a
        // broker and answering devices of its own (nothing from Tests/).
        .executableTarget(
            name: "thing-agent-bench",
            dependencies: ["ThingAgent", "MQTT", "JSON"],
            swiftSettings: swift6
        ),

        // Test support: a real mosquitto broker on a free loopback port, certificates, temp dirs, an agent started
        // on a broker (withAgent), the shipped thing models.
        .target(
            name: "TestSupport",
            dependencies: ["MQTT", "JSON", "ThingAgent"],
            path: "Tests/TestSupport",
            swiftSettings: swift6
        ),
        // JSONTests and MQTTTests use ThingAgent's SeededGenerator (package access), the simulator's.
        .testTarget(name: "JSONTests", dependencies: ["JSON", "ThingAgent", "TestSupport"], swiftSettings: swift6),
        .testTarget(name: "MQTTTests", dependencies: ["MQTT", "ThingAgent", "TestSupport"], swiftSettings: swift6),
        .testTarget(name: "SQLiteTests", dependencies: ["SQLite", "TestSupport"], swiftSettings: swift6),
        .testTarget(name: "HTTPEndpointTests", dependencies: ["HTTPEndpoint", "TestSupport"], swiftSettings: swift6),
        .testTarget(name: "ThingAgentTests", dependencies: ["ThingAgent", "ThingAgentCore", "Platform", "TestSupport"], swiftSettings: swift6),
        .testTarget(
            name: "EndToEndTests",
            dependencies: ["ThingAgent", "ThingAgentCore", "TestSupport", "thing-agent"],
            swiftSettings: swift6
        ),
    ]
)
