extension DeviceSnapshot {
    /// Moves this sub-device to `gateway` after a finished gateway replacement.
    ///
    /// The relink counts as an info report made at `time`, the new gateway's time of the `finish` report. So the
    /// usual rule decides what a later info report does: one older than the finish (a retained copy published by the
    /// faulty gateway before it failed, delivered again on a new subscription) loses; one newer wins, even when it
    /// names the old gateway, because it is what the device says about itself after the replacement.
    mutating package func relink(to gateway: String, at time: Millis, now: Millis) {
        info.set("gatewayId", .string(gateway))
        infoTime = max(infoTime ?? time, time)
        updatedAt = now
    }

    /// Whether `self` is a gateway that `gateway` can replace: another gateway of the same product in the same space.
    package func isReplaceable(by gateway: DeviceSnapshot) -> Bool {
        id != gateway.id && info.category == .gateway
            && info.productId != nil && info.productId == gateway.info.productId
            && info.spaceId != nil && info.spaceId == gateway.info.spaceId
    }
}
