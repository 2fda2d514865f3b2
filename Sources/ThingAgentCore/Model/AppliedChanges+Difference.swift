extension AppliedChanges {
    /// What moved between two copies of a device: used when a process learns a device's state from the shared
    /// cache file, where another process may already have applied some of it.
    package init(from before: DeviceSnapshot?, to after: DeviceSnapshot) {
        self.init()
        for code in after.properties.keys.sorted() {
            let value = after.properties[code]!
            let previous = before?.properties[code]
            if previous != value {
                properties.append(PropertyChange(code: code, value: value.value, time: value.time, previous: previous?.value))
            }
        }
        if let online = after.online, before?.online != online { status = online }
        if after.wifiSignal != before?.wifiSignal { wifiSignal = after.wifiSignal }
        if after.rsrp != before?.rsrp { rsrp = after.rsrp }
        info = (before?.info ?? DeviceInfo(devId: after.id)) != after.info
        if after.transfer != before?.transfer { transfer = after.transfer }
    }
}
