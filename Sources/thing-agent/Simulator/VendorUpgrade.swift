import ThingAgent

/// What a vendor dialect's device publishes through an upgrade: its progress steps, its failures, the restart (a
/// gateway logs its sub-device out and in around it) and the version it then runs. Linkkit's and Tuya's SDKs go
/// through the same sequence (`Simulator.vendorUpgrade`); only the messages differ.
struct VendorUpgradeWire {
    /// The progress steps, the last the downloaded image (100).
    let steps: [Int]
    let progress: (Int) -> Publication
    /// A failure at `download`, `verify` or `flash`.
    let failed: (UpgradeFailure) -> Publication
    let logout: (_ gateway: VirtualDevice) -> Publication
    let login: (_ gateway: VirtualDevice) -> Publication
    /// The device's message ids start again, as after any restart.
    let restart: () -> Void
    /// The version it runs, reported after the restart.
    let report: () -> Publication
}

extension Simulator {
    /// A vendor dialect's device installs `version`: `wire.steps` a step apart, then it restarts and reports the
    /// new version. At the failure rate it fails instead: `download` after step 50, `verify` instead of step 100,
    /// `flash` after it, comes back with the old version (`rollback`), or stops reporting after the first step
    /// (`stall`).
    func vendorUpgrade(_ device: VirtualDevice, to version: String, wire: VendorUpgradeWire) async {
        defer { device.endUpgrade() }
        guard let connection = connection(of: device) else { return }
        let failure = device.drawUpgradeFailure(rate: options.otaFailureRate) ? options.otaFailAt : nil
        func step() async -> Bool {
            do { try await Task.sleep(for: .seconds(options.otaStep)) } catch { return false }
            return true
        }
        for number in wire.steps {
            guard await step() else { return }
            if failure == .verify && number == 100 {
                await connection.publish(wire.failed(.verify))
                return
            }
            await connection.publish(wire.progress(number))
            if failure == .stall { return }
            if failure == .download && number == 50 {
                guard await step() else { return }
                await connection.publish(wire.failed(.download))
                return
            }
        }
        guard await step() else { return }
        if failure == .flash {
            await connection.publish(wire.failed(.flash))
            return
        }
        // The restart: a sub-device's gateway logs it out and in again around it.
        let gateway = device.plan.gatewayId.flatMap { self.device($0) }
        if let gateway { await connection.publish(wire.logout(gateway)) }
        wire.restart()
        if failure != .rollback { device.installed(version) }
        if let gateway { await connection.publish(wire.login(gateway)) }
        await connection.publish(wire.report())
        stats.upgrades.add(1, ordering: .relaxed)
    }
}
