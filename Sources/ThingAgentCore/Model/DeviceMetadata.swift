/// What the user set for a device locally (never reported by the device, never overwritten by its reports).
public struct DeviceMetadata: Sendable, Equatable {
    /// The local name; nil shows the name the device reports.
    public var name: String?
    public var room: String?
    /// An icon URL.
    public var icon: String?
    /// Whether the offline watch warns about this device (on unless switched off).
    public var offlineWarning: Bool
    /// Agent time of the last edit; nil when the device was never edited.
    public var updatedAt: Millis?

    public init(name: String? = nil, room: String? = nil, icon: String? = nil, offlineWarning: Bool = true,
                updatedAt: Millis? = nil) {
        self.name = name
        self.room = room
        self.icon = icon
        self.offlineWarning = offlineWarning
        self.updatedAt = updatedAt
    }
}
