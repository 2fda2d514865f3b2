import ThingAgentCore
/// Runs a stall watch's `check` until the task is cancelled, every tenth of `timeout` (20 ms to 1 s), so that a
/// stall is ended at most a tenth of the timeout late. The transfer and firmware-upgrade watches share it.
func runStallChecks(timeout: Duration, _ check: (Millis) -> Void) async {
    let tick = Duration.milliseconds(min(1000, max(20, Int64(timeout.seconds * 100))))
    // A cancelled sleep ends the checks at once: no verdict after the owner stopped them (a stand-in's last flush).
    while (try? await Task.sleep(for: tick)) != nil {
        check(Timestamp.now())
    }
}
