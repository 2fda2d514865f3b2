internal import CLazyLibraries
import JSON
import ThingAgentCore

/// One pairing made by `thing-agent pair` (or `Agent.pair`): a token valid for a while, for one device, with
/// bootstrap broker credentials named `username` that reach only the pairing's own activation topics.
public struct Pairing: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Made, not used yet, not expired.
        case pending
        /// A device is activating with it (its broker access is being made); pending again if that fails.
        case activating
        /// A device activated with it.
        case used
        /// Its time ran out unused.
        case expired
        /// Revoked by `pair revoke`.
        case revoked
    }

    /// The bootstrap broker user, also the level that names the activation topics (`R/<username>/thing/activate`).
    public var username: String
    public var spaceId: Int64?
    /// For a sub-device: the gateway that activates it.
    public var gatewayId: String?
    /// When set, only a device of this product may use it.
    public var productId: String?
    public var createdAt: Millis
    public var expiresAt: Millis
    public var state: State
    /// The device it activated.
    public var deviceId: String?
    public var endedAt: Millis?
    /// The dialect its device speaks, which decides the broker user, client id and topics it gets: nil for the
    /// native one, `alink` for an Alink device (docs/provisioning.md, "Alink devices").
    public var dialect: String?

    /// The state at `now`: a pending pairing past its expiry is expired, even before the agent marked it so.
    public func state(at now: Millis) -> State {
        state == .pending && expiresAt <= now ? .expired : state
    }

    public func json(now: Millis) -> JSONObject {
        func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
        func number(_ value: Int64?) -> JSONValue { value.map(JSONValue.integer) ?? .null }
        return JSONObject([
            ("username", .string(username)), ("state", .string(state(at: now).rawValue)),
            ("spaceId", number(spaceId)), ("gatewayId", text(gatewayId)), ("productId", text(productId)),
            ("createdAt", .integer(createdAt)), ("expiresAt", .integer(expiresAt)), ("devId", text(deviceId)),
            ("endedAt", number(endedAt)), ("dialect", .string(dialect ?? "native")),
        ])
    }

    public init?(json: JSONValue) {
        guard let object = json.objectValue, let username = object["username"]?.stringValue,
              let state = object["state"]?.stringValue.flatMap(State.init(rawValue:)),
              let created = object["createdAt"]?.int64Value, let expires = object["expiresAt"]?.int64Value
        else { return nil }
        self.init(username: username, spaceId: object["spaceId"]?.int64Value, gatewayId: object["gatewayId"]?.stringValue,
                  productId: object["productId"]?.stringValue, createdAt: created, expiresAt: expires, state: state,
                  deviceId: object["devId"]?.stringValue, endedAt: object["endedAt"]?.int64Value,
                  dialect: object["dialect"]?.stringValue.flatMap { $0 == "native" ? nil : $0 })
    }

    public init(username: String, spaceId: Int64?, gatewayId: String?, productId: String?, createdAt: Millis,
                expiresAt: Millis, state: State, deviceId: String? = nil, endedAt: Millis? = nil,
                dialect: String? = nil) {
        self.username = username
        self.spaceId = spaceId
        self.gatewayId = gatewayId
        self.productId = productId
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.state = state
        self.deviceId = deviceId
        self.endedAt = endedAt
        self.dialect = dialect
    }
}

/// A pairing as it is made: the only time its token and bootstrap password exist outside the device.
public struct NewPairing: Sendable {
    public let pairing: Pairing
    public let token: String
    public let password: String

    /// `{"token","username","password","clientId","expiresAt", ...}`: what `pair --json` prints. The bootstrap
    /// credentials connect with `clientId` (the user name) only.
    public var json: JSONObject {
        var object = JSONObject([
            ("token", .string(token)), ("username", .string(pairing.username)), ("password", .string(password)),
            ("clientId", .string(pairing.username)),
            ("expiresAt", .integer(pairing.expiresAt)),
        ])
        for (key, value) in pairing.json(now: pairing.createdAt) where key != "username" && key != "expiresAt" {
            object[key] = value
        }
        return object
    }
}

/// Random secrets and the token's hash.
enum Secrets {
    /// `bytes` random bytes (the system's generator: getrandom) as lowercase hex.
    static func hex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte, radix: 16).leftPadded(to: 2)
        }.joined()
    }

    /// A pairing token: 160 random bits.
    static func token() -> String { hex(bytes: 20) }

    /// A broker password: 128 random bits.
    static func password() -> String { hex(bytes: 16) }

    /// A bootstrap user name of the device-id shape: `pair-` and 32 random bits.
    static func bootstrapUsername() -> String { bootstrapPrefix + hex(bytes: 4) }

    /// Reserved: no device id begins with it.
    static let bootstrapPrefix = "pair-"

    /// SHA-256 of the token, as hex: what the cache keeps. OpenSSL is loaded on first use (CLazyLibraries.h).
    static func hash(_ token: String) throws -> String {
        if let failure = thing_agent_load_openssl() { throw PairingHashUnavailable(reason: String(cString: failure)) }
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        let bytes = Array(token.utf8)
        bytes.withUnsafeBufferPointer { input in
            _ = thing_agent_openssl_table().pointee.SHA256(input.baseAddress, input.count, &digest)
        }
        return digest.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

/// The token hash cannot be computed: OpenSSL's libcrypto is missing (the package depends on it).
struct PairingHashUnavailable: Error, CustomStringConvertible {
    let reason: String
    var description: String { "pairing tokens cannot be hashed: \(reason) (install the Debian package libssl3)" }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
