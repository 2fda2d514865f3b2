// swift-tools-version:6.0
import PackageDescription

// A service that embeds ThingAgent, depending on the project by path (docs/library.md).
let package = Package(
    name: "fleet-dashboard",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "thing-agent", path: "../..")],
    targets: [
        .executableTarget(
            name: "fleet-dashboard",
            dependencies: [.product(name: "ThingAgent", package: "thing-agent")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
