import Foundation
import JSON
import Synchronization
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// Gateway replacement through the library, against a real broker and a real cache file.
@Suite("Gateway transfer", .serialized)
struct GatewayTransferTests {
    /// Makes `gwNew` accept every transfer start with `code`.
    static func accept(_ fleet: GatewayFleet, code: Int = 0) async throws -> Task<Void, Never> {
        try await fleet.new.answer("gateway/transfer/start") { _ in
            code == 0 ? #""code":0"# : #""code":\#(code),"message":"a transfer is already running""#
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func gatewaysAreTheSameProductInTheSameSpaceOfflineFirst() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                #expect(manager.gateways().map(\.id) == ["gwOld", "gwPlain"])
                #expect(GatewayTransferManager.gateways(deviceId: "gwNew", agent: agent).map(\.id) == ["gwOld", "gwPlain"])
                #expect(manager.deviceSupportsTransfer())
                #expect(!GatewayTransferManager.deviceSupportsTransfer(deviceId: "gwPlain", agent: agent))
                #expect(!GatewayTransferManager.deviceSupportsTransfer(deviceId: "nosuch", agent: agent))
                #expect(manager.deviceTransferInfo() == .none("gwNew"))
                #expect(GatewayTransferManager.gateways(deviceId: "nosuch", agent: agent).isEmpty)
                await fleet.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func preconditionsFailBeforeAnythingIsSent() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let spy = try await StartRequestSpy(broker)

                // Unsupported: no gatewayTransfer ability.
                let plain = GatewayTransferManager(deviceId: "gwPlain", agent: agent)
                await #expect {
                    try await plain.transfer(fromGateway: "gwOld")
                } throws: { error in
                    guard case RequestError.unsupported("gwPlain", let reason) = error else { return false }
                    return reason.contains("gatewayTransfer")
                }
                // Unknown faulty gateway, and a gateway of another space.
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                for faulty in ["nosuch", "gwFar", "lamp"] {
                    await #expect {
                        try await manager.transfer(fromGateway: faulty)
                    } throws: { error in
                        guard case RequestError.unsupported("gwNew", let reason) = error else { return false }
                        return reason.contains("\(faulty) is not a gateway it can replace") && reason.contains("gwOld")
                    }
                }
                // Already transferring: a running status was reported.
                try await fleet.report(.deviceDataInit, time: t0 + 10)
                try await waitUntil { manager.deviceTransferInfo().status == .deviceDataInit }
                await #expect {
                    try await GatewayTransferManager.transfer(deviceId: "gwNew", fromGateway: "gwOld", agent: agent)
                } throws: { error in
                    guard case RequestError.unsupported("gwNew", let reason) = error else { return false }
                    return reason.contains("busy") && reason.contains("deviceDataInit")
                }
                try await Task.sleep(for: .milliseconds(200))
                #expect(spy.count == 0, "a refused precondition must publish nothing")
                await spy.client.disconnect()
                await fleet.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func finishRelinksSubDevicesInMemoryAndFileAndListenersHearEveryStage() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let database = agent.configuration.cache.database
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let answering = try await Self.accept(fleet)
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                let log = TransferLog(), releasedLog = TransferLog()
                let recorder = TransferRecorder(log)
                var released: TransferRecorder? = TransferRecorder(releasedLog)
                weak let weakReleased = released
                manager.addListener(recorder)
                manager.addListener(released!)
                let updates = manager.statusUpdates
                let collected = Task {
                    var seen: [TransferStatus] = []
                    for await info in updates {
                        seen.append(info.status)
                        if info.status == .finish { break }
                    }
                    return seen
                }

                let started = try await manager.transfer(fromGateway: "gwOld")
                #expect(started.status == .unknown)
                #expect(started.targetDeviceId == "gwOld")
                #expect(started.targetDeviceName == "Old gateway")
                try await waitUntil { releasedLog.statuses == [.unknown] }
                released = nil
                #expect(weakReleased == nil, "the manager must not keep a listener alive")

                for (n, status) in [TransferStatus.deviceConfigInit, .deviceDataInit, .osConfigInit, .finish].enumerated() {
                    try await fleet.report(status, time: t0 + 100 + Int64(n))
                }
                try await waitUntil { log.statuses.last == .finish }
                #expect(log.statuses == [.unknown, .deviceConfigInit, .deviceDataInit, .osConfigInit, .finish])
                #expect(await collected.value == [.unknown, .deviceConfigInit, .deviceDataInit, .osConfigInit, .finish])
                #expect(releasedLog.statuses == [.unknown])

                #expect(agent.cache.subDevices(of: "gwNew").map(\.id) == ["sub1", "sub2"])
                #expect(agent.cache.subDevices(of: "gwOld").isEmpty)
                // SQLite gets the change from the flusher, a moment later.
                try await waitUntil {
                    let file = try? CacheReader(path: database)
                    return (try? file?.devices().filter { $0.info.gatewayId == "gwNew" }.map(\.id)) == ["sub1", "sub2"]
                        && (try? file?.device("gwNew"))??.transfer?.status == .finish
                }
                #expect(manager.deviceTransferInfo().status == .finish)

                // The relink rule: an info report older than the finish (a retained copy from before) loses;
                // a newer one is the device's own word and wins.
                let sub1 = try #require(fleet.others.first { $0.id == "sub1" })
                try await sub1.info(#"{"gatewayId":"gwOld","name":"stale"}"#, time: t0 + 50)
                try await sub1.info(#"{"name":"marker"}"#, time: t0 + 200)
                try await waitUntil { agent.cache.device("sub1")?.info.name == "marker" }
                #expect(agent.cache.device("sub1")?.info.gatewayId == "gwNew")
                try await sub1.info(#"{"gatewayId":"gwOld"}"#, time: t0 + 300)
                try await waitUntil { agent.cache.device("sub1")?.info.gatewayId == "gwOld" }
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func refusalNamesTheCodeAndRecordsNothing() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let answering = try await Self.accept(fleet, code: 1006)
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                await #expect(throws: RequestError.refused(code: 1006, message: "a transfer is already running")) {
                    try await manager.transfer(fromGateway: "gwOld")
                }
                #expect(RequestError.refused(code: 1006, message: nil).description.contains("busy"))
                #expect(manager.deviceTransferInfo().status == .none)
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func failedReportIsPersistedHeardAndMovesNothing() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { agent in
                let database = agent.configuration.cache.database
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let answering = try await Self.accept(fleet)
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                let updates = manager.statusUpdates
                try await manager.transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                try await fleet.report(.failed, failedCode: "subdevice_unreachable", time: t0 + 101)
                var heard: [TransferInfo] = []
                for await info in updates {
                    heard.append(info)
                    if info.status == .failed { break }
                }
                #expect(heard.last?.failedCode == "subdevice_unreachable")
                try await waitUntil {
                    (try? CacheReader(path: database).device("gwNew"))??.transfer?.failedCode == "subdevice_unreachable"
                }
                #expect(agent.cache.subDevices(of: "gwOld").map(\.id) == ["sub1", "sub2"])
                // A failed transfer is over: a new one may start.
                try await manager.transfer(fromGateway: "gwOld")
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func stalledTransferEndsAsFailedWithTimeout() async throws {
        try await withBroker { broker in
            try await withAgent(broker, configure: { $0.transferStallTimeout = .milliseconds(500) }) { agent in
                let database = agent.configuration.cache.database
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: agent)
                let answering = try await Self.accept(fleet)
                let manager = GatewayTransferManager(deviceId: "gwNew", agent: agent)
                let log = TransferLog()
                let recorder = TransferRecorder(log)
                manager.addListener(recorder)
                try await manager.transfer(fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                // Then silence.
                try await waitUntil(timeout: .seconds(10)) { log.last?.status == .failed }
                #expect(log.statuses == [.unknown, .deviceConfigInit, .failed])
                #expect(log.last?.failedCode == "timeout")
                try await waitUntil {
                    let cached = (try? CacheReader(path: database).device("gwNew"))??.transfer
                    return cached?.status == .failed && cached?.failedCode == "timeout"
                }
                #expect(agent.cache.subDevices(of: "gwOld").count == 2)

                // A report made before the verdict is stale; a finish made after it is the gateway's status, but
                // the transfer this agent started is over: nothing moves, and it is counted.
                try await fleet.report(.osConfigInit, time: t0 + 101)
                try await fleet.report(.finish, time: Timestamp.current + 60_000)
                try await waitUntil { log.statuses.last == .finish }
                #expect(log.statuses == [.unknown, .deviceConfigInit, .failed, .finish])
                #expect(agent.statistics.guarded[.untrustedTransfer] == 1)
                #expect(agent.cache.subDevices(of: "gwOld").count == 2 && agent.cache.subDevices(of: "gwNew").isEmpty)
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }

    /// A transfer left running in the file by an interrupted command (the stand-in writer that started it stopped
    /// before any report) cannot block the next one: the next writer on the file ends it once its stall timeout
    /// has passed.
    @Test(.timeLimit(.minutes(1)))
    func followingEndsAStalledTransferLeftInTheFile() async throws {
        try await withBroker { broker in
            let directory = try makeTemporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = agentConfiguration(broker, directory: directory)
            let database = configuration.cache.database
            let fleet = try await GatewayFleet.start(broker)
            // A daemon caches the fleet, then stops: from then on commands write the file themselves.
            let daemon = try Agent(configuration: configuration)
            let running = try await daemon.runUntilSubscribed()
            try await fleet.cached(by: daemon)
            running.cancel()
            _ = try? await running.value
            try await waitUntil { ((try? CacheReader(path: database).devices()) ?? []).count == 7 }
            let answering = try await Self.accept(fleet)
            configuration.transferStallTimeout = .milliseconds(500)
            func standIn() async throws -> Agent {
                let agent = try Agent(configuration: configuration, role: .standIn)
                try await agent.start()
                return agent
            }
            let interrupted = try await standIn()
            try await GatewayTransferManager(deviceId: "gwNew", agent: interrupted).transfer(fromGateway: "gwOld")
            await interrupted.stop()  // as if Ctrl-C: no report came, nobody watches it any more
            #expect((try CacheReader(path: database).device("gwNew"))?.transfer?.status == .unknown)

            let next = try await standIn()
            let timers = Task { await next.runTimers() }
            let manager = GatewayTransferManager(deviceId: "gwNew", agent: next)
            try await waitUntil { manager.deviceTransferInfo().status == .failed }
            #expect(manager.deviceTransferInfo().status == .failed)
            #expect(manager.deviceTransferInfo().failedCode == "timeout")
            let started = try await manager.transfer(fromGateway: "gwOld")
            #expect(started.status == .unknown)
            timers.cancel()
            await next.stop()
            answering.cancel()
            await fleet.disconnect()
        }
    }

    /// A client of the daemon (`AgentClient`, as the CLI is) starts a transfer through the daemon's API and
    /// follows it on the daemon's event feed; the daemon alone writes the file, so the relink never rolls back
    /// what the daemon wrote after the client read the file.
    @Test(.timeLimit(.minutes(1)))
    func requesterFollowingATransferNeverRollsBackTheDaemonsWrites() async throws {
        try await withBroker { broker in
            try await withAgent(broker) { daemon in
                let database = daemon.configuration.cache.database
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: daemon)
                let answering = try await Self.accept(fleet)
                try await waitUntil { ((try? CacheReader(path: database).devices()) ?? []).count == 7 }
                let requester = try AgentClient(configuration: daemon.configuration)
                try await requester.connect()
                #expect(try requester.device("sub1")?.wifiSignal == nil)

                // Written by the daemon only, after the client read the file.
                let sub1 = try #require(fleet.others.first { $0.id == "sub1" })
                try await sub1.signal(wifi: -61, time: t0 + 5)
                try await waitUntil { daemon.cache.device("sub1")?.wifiSignal?.dBm == -61 }

                let updates = try await requester.transferUpdates(gateway: "gwNew")
                let start = try await requester.transfer(gateway: "gwNew", fromGateway: "gwOld")
                #expect(start.moving == ["sub1", "sub2"])
                #expect(start.info.status == .unknown)
                for (n, status) in [TransferStatus.deviceConfigInit, .deviceDataInit, .osConfigInit, .finish].enumerated() {
                    try await fleet.report(status, time: t0 + 100 + Int64(n))
                }
                var seen: [TransferStatus] = []
                for await info in updates {
                    seen.append(info.status)
                    if info.status == .finish { break }
                }
                #expect(seen == [.unknown, .deviceConfigInit, .deviceDataInit, .osConfigInit, .finish])
                #expect(try await requester.subDevices(of: "gwNew") == ["sub1", "sub2"])
                try await waitUntil { daemon.cache.subDevices(of: "gwNew").count == 2 }

                try await waitUntil { (try? CacheReader(path: database).device("sub1"))??.info.gatewayId == "gwNew" }
                let onDisk = try #require(try CacheReader(path: database).device("sub1"))
                #expect(onDisk.info.gatewayId == "gwNew")
                #expect(onDisk.wifiSignal?.dBm == -61, "the requester wrote back its older copy")
                await requester.disconnect()
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }

    /// Two followers of one gateway in one client each get every change; one that ends leaves the other
    /// working; when the last ends, the client unsubscribes at the broker (whose log says so), and a new follower
    /// subscribes again.
    @Test(.timeLimit(.minutes(1)))
    func twoFollowersOfOneGatewayBothSeeEveryChangeAndTheLastToEndUnsubscribes() async throws {
        var options = MosquittoBroker.Options()
        options.extraConfig = "log_type unsubscribe"
        try await withBroker(options) { broker in
            try await withAgent(broker) { daemon in
                let fleet = try await GatewayFleet.start(broker)
                try await fleet.cached(by: daemon)
                let answering = try await Self.accept(fleet)
                let requester = try AgentClient(configuration: daemon.configuration)
                try await requester.connect()
                let topic = "\(daemon.configuration.events.topic)/gwNew/transfer"
                // mosquitto logs "<client id> <filter>" for each filter a client unsubscribes from.
                let unsubscribes: @Sendable () -> Int = {
                    broker.log().split(separator: "\n").filter {
                        $0.hasSuffix(" " + topic) && $0.contains(" \(daemon.configuration.mqtt.clientID)-cli-")
                    }.count
                }
                func follow() async throws -> (TransferLog, Task<Void, Never>) {
                    let updates = try await requester.transferUpdates(gateway: "gwNew")
                    let log = TransferLog()
                    return (log, Task { for await info in updates { log.append(info) } })
                }
                let (first, firstTask) = try await follow()
                let (second, secondTask) = try await follow()

                _ = try await requester.transfer(gateway: "gwNew", fromGateway: "gwOld")
                try await fleet.report(.deviceConfigInit, time: t0 + 100)
                for log in [first, second] {
                    try await waitUntil(timeout: .seconds(20)) { log.statuses == [.unknown, .deviceConfigInit] }
                }

                // The first ends; the second still gets the rest, and the subscription stays.
                firstTask.cancel()
                await firstTask.value
                try await fleet.report(.deviceDataInit, time: t0 + 101)
                try await fleet.report(.finish, time: t0 + 102)
                try await waitUntil(timeout: .seconds(20)) { second.statuses.last == .finish }
                #expect(second.statuses == [.unknown, .deviceConfigInit, .deviceDataInit, .finish])
                #expect(first.statuses == [.unknown, .deviceConfigInit])
                #expect(unsubscribes() == 0, "\(broker.log())")

                // The last ends: the broker hears the unsubscribe.
                secondTask.cancel()
                await secondTask.value
                try await waitUntil(timeout: .seconds(20)) { unsubscribes() == 1 }

                // A new follower subscribes again and hears the next transfer.
                let (third, thirdTask) = try await follow()
                _ = try await requester.transfer(gateway: "gwNew", fromGateway: "gwOld")
                try await waitUntil(timeout: .seconds(20)) { third.statuses == [.unknown] }
                thirdTask.cancel()
                await thirdTask.value
                try await waitUntil(timeout: .seconds(20)) { unsubscribes() == 2 }
                await requester.disconnect()
                answering.cancel()
                await fleet.disconnect()
            }
        }
    }
}
