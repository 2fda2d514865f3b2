import FoundationEssentials
import ThingAgent

/// `thing-agent transfer NEW --from FAULTY`: a healthy gateway takes over the sub-devices of a faulty one.
enum TransferCommand: Command {
    static let spec = CommandSpec(
        name: "transfer",
        summary: "have a gateway take over the sub-devices of a faulty one, showing its progress",
        usage: "thing-agent transfer DEVICE --from FAULTY [--timeout S] [options]",
        options: [
            OptionSpec(name: "from", valueName: "FAULTY", help: "the faulty gateway whose sub-devices move"),
            OptionSpec(name: "timeout", valueName: "S",
                       help: "give up waiting after S seconds (the transfer itself goes on)"),
        ] + CommonOptions.options,
        discussion: """
            Checks that DEVICE has the gatewayTransfer ability, runs no transfer, and that FAULTY is one of
            the gateways it can replace (see 'thing-agent gateways DEVICE'); then asks DEVICE to start and
            follows its stages: deviceConfigInit, deviceDataInit, osConfigInit, finish. On finish the
            sub-devices of FAULTY are re-linked to DEVICE in the cache.

            Exits 0 only on finish: 1 when the transfer failed or cannot start, 4 when DEVICE refused it
            (1006: busy), 5 when no progress came for transferStallTimeout seconds (default 120; the
            transfer is then recorded as failed with failedCode timeout) or --timeout passed, 7 when
            DEVICE is offline. While the daemon runs, it starts and follows the transfer (its API's transfer
            method, its own transferStallTimeout) and the command follows the daemon's event feed.

            """ + ExitCode.table)

    static func run(_ arguments: ParsedArguments) async throws -> ExitCode {
        let device = try deviceArgument(arguments)
        guard let faulty = arguments.value("from") else {
            throw CommandFailure(code: .usage, message: "missing --from FAULTY\nUsage: \(spec.usage)")
        }
        guard DeviceID.isValid(faulty) else {
            throw CommandFailure(code: .usage, message: "'\(faulty)' is not a device id")
        }
        let configuration = try CommonOptions.configuration(arguments)
        let patience = try seconds(arguments)
        return try await withRequests(configuration) { requests in
            // Followed before starting, so that no report of this transfer can be missed.
            let follow = try await TransferFollow.start(device, from: faulty, on: requests)
            let moving = follow.start.moving
            Console.out("\(device) takes over \(faulty) and its \(moving.count) sub-device\(moving.count == 1 ? "" : "s")")
            let end = await waitForEnd(of: faulty, started: follow.start.info, updates: follow.updates,
                                       patience: patience)
            follow.stop()
            let moved = end.ended ? try await follow.ended(end.last) : []
            let code = try outcome(end, device: device, faulty: faulty, moved: moved.filter { moving.contains($0) },
                                   stall: follow.start.stallTimeout.seconds, patience: patience)
            if end.last.status == .finish {
                Console.out(await movedLocally(from: faulty, to: device, finishedAt: end.last.time,
                                               configuration: configuration))
            }
            return code
        }
    }

    /// Shows each change until the transfer finishes or fails; nil when `patience` ran out first.
    static func waitForEnd(of faulty: String, started: TransferInfo, updates: AsyncStream<TransferInfo>,
                           patience: Double?) async -> (last: TransferInfo, ended: Bool) {
        let follow: @Sendable () async -> (last: TransferInfo, ended: Bool) = {
            var progress = TransferProgress()
            var last = started
            progress.show(started)
            for await info in updates where info.targetDeviceId == faulty {
                last = info
                progress.show(info)
                if info.status == .finish || info.status == .failed { return (info, true) }
            }
            progress.close()
            return (last, false)
        }
        guard let patience else { return await follow() }
        // Running out of patience cancels the following, which ends the stream.
        return await withTimeout(.milliseconds(Int64(patience * 1000)), follow)
    }

    /// What the replacement moved besides the sub-devices (groups, scenes, links, local fields), as the writer
    /// recorded it in the write of the re-linked sub-devices: waited for a few seconds (its next flush).
    static func movedLocally(from faulty: String, to device: String, finishedAt time: Millis,
                             configuration: AgentConfiguration) async -> String {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5)
        while clock.now < deadline {
            let recorded = (try? readLocal(configuration).replacements(involving: device))?
                .first { $0.old == faulty && $0.time == time }
            if let recorded { return recorded.summary }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return "no replacement of \(faulty) recorded in the cache yet: its groups, scenes, links and local fields move "
            + "when the cache's writer writes the finish"
    }

    static func outcome(_ end: (last: TransferInfo, ended: Bool), device: String, faulty: String, moved: [String],
                        stall: Double, patience: Double?) throws -> ExitCode {
        let last = end.last
        guard end.ended else {
            throw CommandFailure(code: .timeout, message: """
                gave up waiting after \(Format.seconds(patience ?? 0)) s; the transfer may still be running \
                (last status \(last.status))
                """)
        }
        switch last.status {
        case .finish:
            Console.out("finished: \(moved.count) sub-device\(moved.count == 1 ? "" : "s") of \(faulty) now on \(device)"
                + (moved.isEmpty ? "" : ": " + moved.joined(separator: ", ")))
            return .success
        case .failed where last.failedCode == "timeout":
            throw CommandFailure(code: .timeout, message: """
                the transfer made no progress for \(Format.seconds(stall)) s and was ended as failed \
                (failedCode timeout)
                """)
        default:
            throw CommandFailure(code: .failure, message: "the transfer failed"
                + (last.failedCode.isEmpty ? "" : " with failedCode \(last.failedCode)")
                + "; the sub-devices stay with \(faulty)")
        }
    }
}
