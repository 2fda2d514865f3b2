import Foundation
import JSON
import Testing
import TestSupport

/// Parses and returns the error, or nil when the input was accepted.
func parseError(_ bytes: [UInt8], maxDepth: Int = JSONParser.defaultMaxDepth) -> JSONError? {
    do {
        _ = try JSONParser.parse(bytes, maxDepth: maxDepth)
        return nil
    } catch {
        return error
    }
}

func parseError(_ text: String, maxDepth: Int = JSONParser.defaultMaxDepth) -> JSONError? {
    parseError(Array(text.utf8), maxDepth: maxDepth)
}

/// The payloads of the device protocol (docs/protocol.md), used as round-trip and mutation seeds. The thing models
/// are the shipped files themselves (`shippedModelTexts()`).
let protocolPayloads: [String] = [
    #"{"msgId":"45lkj3551234","time":1764450000000,"data":{"switch_1":{"value":true,"time":1764450000000},"bright_value":{"value":800,"time":1764450000000},"mode":"white"}}"#,
    #"{"time":1764450000000,"status":"online"}"#,
    #"{"time":1764450000000,"status":{"value":3,"time":1764450000000}}"#,
    #"{"time":1764450000000,"wifiSignal":-58,"rsrp":-97}"#,
    #"""
    {"msgId":"7","time":1764450000000,"data":{
      "devId":"bf12ab","name":"Hall light","productId":"p-light-1","category":"device",
      "ip":"203.0.113.7","lanIp":"192.168.1.23","mac":"a4:c1:38:00:11:22","timezone":"+08:00",
      "netStrength":"76%","wifiSignal":-58,"iccid":null,"rsrp":null,"channel":null,"vendorName":null,
      "homekitCode":null,"connectAbility":"gateway","gatewayId":"gw01","spaceId":1001,"firmwareVersion":"1.4.2",
      "abilities":["wifiList"],"hardwareInfo":{"module":"WBR3","flash":"2MB"}}}
    """#,
    #"{"msgId":"91","time":1764450000000,"data":{"targetDeviceId":"gwOld","targetDeviceName":"Old gateway","sourceDeviceId":"gwNew","status":2,"failedCode":""}}"#,
    #"{"msgId":"a1","time":1764450000000,"data":{"switch_1":false}}"#,
    #"{"msgId":"a1","time":1764450000012,"code":0}"#,
    #"{"msgId":"a2","time":1764450000000}"#,
    #"{"msgId":"a3","time":1764450000000,"data":{}}"#,
    #"{"msgId":"a3","time":1764450000900,"code":0,"data":[{"ssid":"OS_BASE_2G","rssi":-45,"sec":5},{"ssid":"We","rssi":-52,"sec":5}]}"#,
    #"{"msgId":"a4","time":1764450000000,"data":{"targetDeviceId":"gwOld"}}"#,
    #"{"label":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n","t":-12.5e-3,"big":12345678901234567890,"u":"日本語 ✓"}"#,
]

/// The thing models that ship (Config/models/*.json), each as its file's text: parser input as the agent reads it.
func shippedModelTexts() throws -> [String] {
    let files = try FileManager.default.contentsOfDirectory(atPath: shippedModelsDirectory())
        .filter { $0.hasSuffix(".json") }.sorted()
    return try files.map { try shippedModel(String($0.dropLast(".json".count))) }
}
