import JSON
import Testing

/// SplitMix64: a small, fast, seedable generator so randomized tests are reproducible.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

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

/// The payloads of the device protocol (docs/protocol.md), used as round-trip and mutation seeds.
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
    #"""
    {"productId":"p-light-1","properties":[
      {"code":"switch_1","type":"bool","access":"rw"},
      {"code":"bright_value","type":"value","min":10,"max":1000,"step":1,"access":"rw"},
      {"code":"mode","type":"enum","range":["white","colour","scene"],"access":"rw"},
      {"code":"temp_current","type":"value","min":-200,"max":1000,"access":"ro"},
      {"code":"label","type":"string","maxlen":32,"access":"rw"}]}
    """#,
    #"{"label":"caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \n","t":-12.5e-3,"big":12345678901234567890,"u":"日本語 ✓"}"#,
]
