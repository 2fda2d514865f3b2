import FoundationEssentials
import JSON

/// The latest firmware per product (`firmwareCatalog`, e.g. `Config/firmware.json`):
/// `{"p-plug-1":{"version":"2.0.0","url":"https://...","sha256":"<64 hex>","size":524288,"notes":"..."}}`.
/// The inventory, `ota --latest` and the detail page's `check_firmware_update` read it.
public struct FirmwareCatalog: Sendable, Equatable {
    /// One product's latest image: what `ota/start` sends.
    public struct Image: Sendable, Equatable {
        public var version: String
        public var url: String
        public var sha256: String
        public var size: Int64?
        public var notes: String?

        public init(version: String, url: String, sha256: String, size: Int64? = nil, notes: String? = nil) {
            self.version = version
            self.url = url
            self.sha256 = sha256
            self.size = size
            self.notes = notes
        }
    }

    public private(set) var byProduct: [String: Image]

    public init(_ byProduct: [String: Image] = [:]) {
        self.byProduct = byProduct
    }

    public func latest(for productId: String?) -> Image? {
        productId.flatMap { byProduct[$0] }
    }

    /// A catalog that cannot be used: the file, the product, and why.
    public typealias Error = ConfigError

    /// Reads a catalog file; every error names the file and the product.
    public init(file path: String) throws(Error) {
        let root = try ConfigFile.read(path, .firmwareCatalog)
        do {
            try self.init(json: root)
        } catch {
            throw error.from(path)
        }
    }

    public init(json root: JSONValue) throws(Error) {
        guard let object = root.objectValue else { throw Error(.firmwareCatalog, "the top level must be an object of products") }
        var images: [String: Image] = [:]
        for (product, entry) in object {
            images[product] = try Self.image(entry, product: product)
        }
        self.init(images)
    }

    private static func image(_ value: JSONValue, product: String) throws(Error) -> Image {
        func fail(_ reason: String) -> Error { Error(.firmwareCatalog, key: "product '\(product)'", reason) }
        guard let entry = value.objectValue else { throw fail("must be an object") }
        for key in entry.keys where !["version", "url", "sha256", "size", "notes"].contains(key) {
            throw fail("unknown key '\(key)'")
        }
        guard let version = entry["version"]?.stringValue, isVersion(version) else {
            throw fail("'version' must be dotted numbers such as 1.10.0, at most \(InputBounds.maxFirmwareVersionBytes) bytes")
        }
        guard let url = entry["url"]?.stringValue, isURL(url) else {
            throw fail("'url' must be a non-empty string of at most \(InputBounds.maxFirmwareURLBytes) bytes")
        }
        guard let sha256 = entry["sha256"]?.stringValue, isSHA256(sha256) else {
            throw fail("'sha256' must be 64 hexadecimal digits")
        }
        var size: Int64?
        if let given = entry["size"], !given.isNull {
            guard let n = given.int64Value, n > 0 else { throw fail("'size' must be a positive integer (bytes)") }
            size = n
        }
        var notes: String?
        if let given = entry["notes"], !given.isNull {
            guard let text = given.stringValue else { throw fail("'notes' must be a string") }
            notes = text
        }
        return Image(version: version, url: url, sha256: sha256, size: size, notes: notes)
    }

    /// Dotted numbers (`FirmwareVersion`) within `InputBounds.maxFirmwareVersionBytes`.
    public static func isVersion(_ text: String) -> Bool {
        text.utf8.count <= InputBounds.maxFirmwareVersionBytes && FirmwareVersion(text) != nil
    }

    /// A non-empty image address within `InputBounds.maxFirmwareURLBytes`.
    public static func isURL(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= InputBounds.maxFirmwareURLBytes
    }

    /// 64 hexadecimal digits, either case.
    public static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x46).contains($0)
            || (0x61...0x66).contains($0) }
    }
}

extension FirmwareCatalog.Image {
    /// The image as JSON (the inventory's `--json`, the API's `firmware`).
    public var json: JSONObject {
        var object = JSONObject([("version", .string(version)), ("url", .string(url)), ("sha256", .string(sha256))])
        if let size { object["size"] = .integer(size) }
        if let notes { object["notes"] = .string(notes) }
        return object
    }
}
