/// Why a payload was refused: not JSON, not an object, too large, or of the wrong shape.
public struct PayloadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { reason }
}
