import JSON
import ThingAgentCore

/// Detail pages as the API carries them (`DeviceDetail.json`), read back by a client of the daemon.
extension DeviceDetail {
    /// The page `json` describes; nil when it is not one.
    public init?(json: JSONValue) {
        guard let id = json["device"]?.stringValue, let sections = json["sections"]?.arrayValue else { return nil }
        self.init(deviceId: id, sections: sections.compactMap(DetailSection.init(json:)))
    }
}

extension DetailSection {
    init?(json: JSONValue) {
        guard let name = json["name"]?.stringValue else { return nil }
        self.init(name: name, header: json["header"]?.objectValue, margin: json["margin"]?.objectValue,
                  items: (json["items"]?.arrayValue ?? []).compactMap(DetailItem.init(json:)))
    }
}

extension DetailItem {
    init?(json: JSONValue) {
        guard let cellType = json["cellType"]?.stringValue,
              let status = json["status"]?.stringValue.flatMap(Status.init(rawValue:)) else { return nil }
        self.init(cellType: cellType, status: status, data: json["data"], message: json["message"]?.stringValue,
                  options: json["options"]?.objectValue ?? JSONObject())
    }
}
