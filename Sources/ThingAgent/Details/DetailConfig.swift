import FoundationEssentials
import JSON
import ThingAgentCore

/// A device-detail layout in the device SDKs' `deviceDetailConfig.json` format: an array of sections, each with a
/// `name`, an optional `header` (`{"cellType": ...}`), `items` (`{"cellType": ...}`, extra keys kept as the item's
/// options) and an optional `margin`.
public struct DetailConfig: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public var cellType: String
        /// Every key of the item but `cellType` (e.g. `versions` for `check_firmware_update`).
        public var options: JSONObject

        public init(cellType: String, options: JSONObject = JSONObject()) {
            self.cellType = cellType
            self.options = options
        }
    }

    public struct Section: Sendable, Equatable {
        public var name: String
        public var header: Item?
        public var items: [Item]
        public var margin: JSONObject?

        public init(name: String, header: Item? = nil, items: [Item], margin: JSONObject? = nil) {
            self.name = name
            self.header = header
            self.items = items
            self.margin = margin
        }
    }

    public var sections: [Section]

    public init(sections: [Section]) {
        self.sections = sections
    }

    /// A layout that cannot be used: the file, the section or item, and why.
    public typealias Error = ConfigError

    /// Reads a config file; every error names the file and the place in it.
    public init(file path: String) throws(Error) {
        let root = try ConfigFile.read(path, .detailConfig)
        do {
            try self.init(json: root)
        } catch {
            throw error.from(path)
        }
    }

    public init(json root: JSONValue) throws(Error) {
        guard let array = root.arrayValue else { throw Error(.detailConfig, "the top level must be an array of sections") }
        var sections: [Section] = []
        for (index, value) in array.enumerated() {
            guard let object = value.objectValue else { throw Error(.detailConfig, "section \(index) is not an object") }
            guard let name = object["name"]?.stringValue, !name.isEmpty else {
                throw Error(.detailConfig, "section \(index) has no 'name'")
            }
            for key in object.keys where !["name", "header", "items", "margin"].contains(key) {
                throw Error(.detailConfig, "section '\(name)': unknown key '\(key)'")
            }
            var header: Item?
            if let value = object["header"], !value.isNull {
                header = try Self.item(value, where: "section '\(name)' header")
            }
            guard let items = object["items"]?.arrayValue else {
                throw Error(.detailConfig, "section '\(name)' has no 'items' array")
            }
            var parsed: [Item] = []
            for (position, item) in items.enumerated() {
                parsed.append(try Self.item(item, where: "section '\(name)' item \(position)"))
            }
            let margin = object["margin"]?.objectValue
            if let value = object["margin"], !value.isNull, margin == nil {
                throw Error(.detailConfig, "section '\(name)': 'margin' must be an object")
            }
            sections.append(Section(name: name, header: header, items: parsed, margin: margin))
        }
        self.sections = sections
    }

    private static func item(_ value: JSONValue, where place: String) throws(Error) -> Item {
        guard var object = value.objectValue, let type = object["cellType"]?.stringValue, !type.isEmpty else {
            throw Error(.detailConfig, "\(place) needs a 'cellType' string")
        }
        _ = object.removeValue(forKey: "cellType")
        return Item(cellType: type, options: object)
    }

    /// The layout used without a config file: the SDKs' sample without its custom test items.
    public static let standard = DetailConfig(sections: [
        Section(name: "headerSection", items: ["header", "device_info", "net_setting", "group_edit_devices"].map { Item(cellType: $0) }),
        Section(name: "offLineWarnSection", header: Item(cellType: "section_off_line_warn"),
                items: [Item(cellType: "off_line_warn")]),
        Section(name: "otherSection", header: Item(cellType: "section_other"),
                items: ["bind_multi_control_link", "group_create", "help_and_feedback", "add_icon_to_home_screen",
                        "show_infrared_gateway_sub_device", "check_device_network", "check_firmware_update"]
                    .map { Item(cellType: $0) }),
        Section(name: "footerSection", items: [Item(cellType: "footer")], margin: JSONObject([("top", .integer(16))])),
    ])
}
