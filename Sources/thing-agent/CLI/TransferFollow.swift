import ThingAgent

/// A gateway transfer the command started and follows: its start, then every change its writer applies (the
/// daemon's event feed, or the stand-in's own events), the stall verdict included.
struct TransferFollow: Sendable {
    let start: TransferStart
    let updates: AsyncStream<TransferInfo>
    /// Once the transfer ended with `last`: the gateway's sub-devices by id as the writer holds them, after the
    /// cache file shows that end too (what the command prints is what a reader of the file sees once it exits).
    let ended: @Sendable (_ last: TransferInfo) async throws -> [String]
    /// Ends `updates` and what feeds it.
    let stop: @Sendable () -> Void

    /// How often the daemon's own view of the transfer is asked for, in case its event feed is off or dropped an
    /// event: only an end (finish, failed) is taken from it.
    static let lookInterval: Duration = .seconds(2)

    /// Waits (a few seconds at most) until the cache file shows the transfer's end `last` and `moved` on its
    /// gateway, as the daemon holds them (its flusher writes them a moment after it applied them).
    static func fileCatchesUp(with last: TransferInfo, moved: [String], _ client: AgentClient) async throws {
        let gateway = last.sourceDeviceId
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            let transfer = try client.device(gateway)?.transfer
            let inFile = Set(try client.cachedSubDevices(of: gateway).map(\.id))
            if transfer?.status == last.status, transfer?.failedCode == last.failedCode, inFile.isSuperset(of: moved) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Opens the feed, then starts the transfer (so that no change is missed).
    static func start(_ gateway: String, from faulty: String, on requests: DeviceRequests) async throws
        -> TransferFollow {
        let (updates, continuation) = AsyncStream<TransferInfo>.makeStream()
        switch requests.sender {
        case .here(let agent):
            let manager = agent.gatewayTransferManager(deviceId: gateway)
            let events = manager.statusUpdates
            let moving = agent.cache.subDevices(of: faulty).map(\.id)
            let info = try await manager.transfer(fromGateway: faulty)
            let pump = Task {
                for await info in events { continuation.yield(info) }
                continuation.finish()
            }
            continuation.onTermination = { _ in pump.cancel() }
            return TransferFollow(
                start: TransferStart(info: info, moving: moving, stallTimeout: agent.configuration.transferStallTimeout),
                // The stand-in's stop writes the file before the command exits.
                updates: updates, ended: { _ in agent.cache.subDevices(of: gateway).map(\.id) },
                stop: { continuation.finish() })
        case .daemon(let client):
            // Without the feed (an ACL that denies it), the daemon's view still tells the end.
            let feed = try? await client.transferUpdates(gateway: gateway)
            let start = try await requests.daemon { try await client.transfer(gateway: gateway, fromGateway: faulty) }
            let pump = Task {
                await withDiscardingTaskGroup { group in
                    if let feed {
                        group.addTask { for await info in feed { continuation.yield(info) } }
                    }
                    group.addTask {
                        while (try? await Task.sleep(for: lookInterval)) != nil {
                            guard let info = try? await client.info(gateway),
                                  let transfer = TransferInfo(json: info["transfer"]),
                                  transfer.status == .finish || transfer.status == .failed else { continue }
                            continuation.yield(transfer)
                        }
                    }
                }
            }
            continuation.onTermination = { _ in pump.cancel() }
            return TransferFollow(
                start: start, updates: updates,
                ended: { last in
                    let moved = try await requests.daemon { try await client.subDevices(of: gateway) }
                    try await fileCatchesUp(with: last, moved: moved, client)
                    return moved
                },
                stop: { continuation.finish() })
        }
    }
}
