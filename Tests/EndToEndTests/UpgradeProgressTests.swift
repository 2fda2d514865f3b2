@testable import ThingAgent
@testable import ThingAgentCore
import Testing
@testable import thing_agent

/// The progress bar of `thing-agent ota` is drawn from numbers a device sends: none may make it trap.
@Suite("ota's progress bar")
struct UpgradeProgressTests {
    func upgrade(_ stage: OTAStage, _ progress: Int) -> OTAUpgrade {
        OTAUpgrade(deviceId: "d1", fromVersion: "1.0.0", image: FirmwareCatalog.Image(version: "2.0.0", url: "u",
                   sha256: String(repeating: "0", count: 64)), stage: stage, progress: progress, failedCode: "",
                   startedAt: 0, updatedAt: 0, reportTime: 0, endedAt: nil)
    }

    @Test func outOfRangeProgressStaysInsideTheBar() {
        for stage in [OTAStage.downloading, .verifying, .flashing, .rebooting] {
            for progress in [Int.min, -1_000, -1, 0, 50, 100, 101, 1_000_000, Int.max] {
                let cells = UpgradeProgress.filledCells(upgrade(stage, progress), width: 24)
                #expect((0...24).contains(cells), "\(stage) \(progress): \(cells)")
            }
        }
        #expect(UpgradeProgress.filledCells(upgrade(.succeeded, 0), width: 24) == 24)
        #expect(UpgradeProgress.filledCells(upgrade(.downloading, 50), width: 24) == 6)
    }
}
