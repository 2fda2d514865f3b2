import ThingAgent

/// The thing models of the simulated products, so that `thing-agent simulate` works without a models directory.
/// `Config/models` holds the same files for the agent (SimulatorPlanTests checks they agree); `--models DIR`
/// replaces these by productId. Every simulated device answers the action `identify`.
///
/// Each native product has an Alink twin (`--dialect alink`), an Alink TSL file as Alibaba's platform exports it,
/// whose product key is the product: the same properties, but booleans and enums as Alink numbers (0/1, the enum's
/// keys), and the events and services its devices post and answer.
enum BuiltinModels {
    static let light = "p-light-1"
    static let gateway = "p-gateway-1"
    static let sensor = "p-sensor-1"
    static let alinkLight = "a1Light1"
    static let alinkGateway = "a1Gateway1"
    static let alinkSensor = "a1Sensor1"

    /// The Alink product (key) in the place of each native one.
    static let alinkProduct = [light: alinkLight, gateway: alinkGateway, sensor: alinkSensor]

    /// The event a device of each product reports now and then (its name; its one parameter is `eventParameter`).
    static let events: [String: String] = [light: "fault", gateway: "alarm", sensor: "button",
                                           alinkLight: "fault", alinkGateway: "alarm", alinkSensor: "button"]
    static let eventParameter = ["fault": "errorCode", "alarm": "level", "button": "press"]

    static let files: [String: String] = [
        light: """
            {"productId":"p-light-1","name":"Demo light","manufacturer":"thing-agent simulator","properties":[
              {"code":"switch_1","name":"Switch","type":"bool","access":"rw"},
              {"code":"bright_value","name":"Brightness","type":"value","min":10,"max":1000,"step":1,"access":"rw"},
              {"code":"mode","name":"Mode","type":"enum","range":["white","colour","scene"],"access":"rw"},
              {"code":"temp_current","name":"Temperature","type":"value","min":-200,"max":1000,"scale":1,"unit":"°C","access":"ro"},
              {"code":"label","name":"Label","type":"string","maxlen":32,"access":"rw"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}],
             "events":[{"code":"fault","outputParams":[{"code":"errorCode","type":"value","min":1,"max":3}]}]}
            """,
        gateway: """
            {"productId":"p-gateway-1","name":"Demo gateway","manufacturer":"thing-agent simulator","properties":[
              {"code":"permit_join","name":"Permit join","type":"value","min":0,"max":254,"step":1,"access":"wo"},
              {"code":"alarm_volume","name":"Alarm volume","type":"enum","range":["mute","low","middle","high"],"access":"rw"},
              {"code":"led_switch","name":"LED","type":"bool","access":"rw"},
              {"code":"gateway_name","name":"Name","type":"string","maxlen":64,"access":"rw"},
              {"code":"zigbee_channel","name":"Zigbee channel","type":"value","min":11,"max":26,"access":"ro"},
              {"code":"sub_device_count","name":"Sub-devices","type":"value","min":0,"max":128,"access":"ro"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}],
             "events":[{"code":"alarm","outputParams":[{"code":"level","type":"value","min":1,"max":3}]}]}
            """,
        sensor: """
            {"productId":"p-sensor-1","name":"Demo sensor","manufacturer":"thing-agent simulator","properties":[
              {"code":"temp_current","name":"Temperature","type":"value","min":-400,"max":800,"scale":1,"unit":"°C","access":"ro"},
              {"code":"humidity_value","name":"Humidity","type":"value","min":0,"max":100,"unit":"%","access":"ro"},
              {"code":"battery_percentage","name":"Battery","type":"value","min":0,"max":100,"unit":"%","access":"ro"},
              {"code":"report_period","name":"Report period","type":"value","min":10,"max":3600,"step":10,"unit":"s","access":"rw"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}],
             "events":[{"code":"button","outputParams":[{"code":"press","type":"value","min":1,"max":3}]}]}
            """,
        alinkLight: """
            {"schema":"https://iotx-tsl.oss-ap-southeast-1.aliyuncs.com/schema.json",
             "profile":{"version":"1.0","productKey":"a1Light1"},
             "properties":[
              {"identifier":"switch_1","name":"Switch","accessMode":"rw","required":false,
               "dataType":{"type":"bool","specs":{"0":"off","1":"on"}}},
              {"identifier":"bright_value","name":"Brightness","accessMode":"rw","required":false,
               "dataType":{"type":"int","specs":{"min":"10","max":"1000","step":"1"}}},
              {"identifier":"mode","name":"Mode","accessMode":"rw","required":false,
               "dataType":{"type":"enum","specs":{"0":"white","1":"colour","2":"scene"}}},
              {"identifier":"temp_current","name":"Temperature","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"-200","max":"1000","step":"1","unit":"0.1 °C"}}},
              {"identifier":"label","name":"Label","accessMode":"rw","required":false,
               "dataType":{"type":"text","specs":{"length":"32"}}}],
             "events":[
              {"identifier":"post","name":"post","type":"info","method":"thing.event.property.post","outputData":[]},
              {"identifier":"fault","name":"Fault","type":"error","method":"thing.event.fault.post",
               "outputData":[{"identifier":"errorCode","name":"Error code",
                              "dataType":{"type":"int","specs":{"min":"1","max":"3"}}}]}],
             "services":[
              {"identifier":"set","name":"set","callType":"async","method":"thing.service.property.set",
               "inputData":[],"outputData":[]},
              {"identifier":"identify","name":"Identify","callType":"async","method":"thing.service.identify",
               "inputData":[{"identifier":"times","name":"Times","dataType":{"type":"int","specs":{"min":"1","max":"10"}}}],
               "outputData":[{"identifier":"blinked","name":"Blinked","dataType":{"type":"int","specs":{"min":"0","max":"10"}}}]}]}
            """,
        alinkGateway: """
            {"schema":"https://iotx-tsl.oss-ap-southeast-1.aliyuncs.com/schema.json",
             "profile":{"version":"1.0","productKey":"a1Gateway1"},
             "properties":[
              {"identifier":"alarm_volume","name":"Alarm volume","accessMode":"rw","required":false,
               "dataType":{"type":"enum","specs":{"0":"mute","1":"low","2":"middle","3":"high"}}},
              {"identifier":"led_switch","name":"LED","accessMode":"rw","required":false,
               "dataType":{"type":"bool","specs":{"0":"off","1":"on"}}},
              {"identifier":"gateway_name","name":"Name","accessMode":"rw","required":false,
               "dataType":{"type":"text","specs":{"length":"64"}}},
              {"identifier":"zigbee_channel","name":"Zigbee channel","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"11","max":"26"}}},
              {"identifier":"sub_device_count","name":"Sub-devices","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"0","max":"128"}}}],
             "events":[
              {"identifier":"post","name":"post","type":"info","method":"thing.event.property.post","outputData":[]},
              {"identifier":"alarm","name":"Alarm","type":"alert","method":"thing.event.alarm.post",
               "outputData":[{"identifier":"level","name":"Level","dataType":{"type":"int","specs":{"min":"1","max":"3"}}}]}],
             "services":[
              {"identifier":"set","name":"set","callType":"async","method":"thing.service.property.set",
               "inputData":[],"outputData":[]},
              {"identifier":"identify","name":"Identify","callType":"async","method":"thing.service.identify",
               "inputData":[{"identifier":"times","name":"Times","dataType":{"type":"int","specs":{"min":"1","max":"10"}}}],
               "outputData":[{"identifier":"blinked","name":"Blinked","dataType":{"type":"int","specs":{"min":"0","max":"10"}}}]}]}
            """,
        alinkSensor: """
            {"schema":"https://iotx-tsl.oss-ap-southeast-1.aliyuncs.com/schema.json",
             "profile":{"version":"1.0","productKey":"a1Sensor1"},
             "properties":[
              {"identifier":"temp_current","name":"Temperature","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"-400","max":"800","step":"1","unit":"0.1 °C"}}},
              {"identifier":"humidity_value","name":"Humidity","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"0","max":"100","unit":"%"}}},
              {"identifier":"battery_percentage","name":"Battery","accessMode":"r","required":false,
               "dataType":{"type":"int","specs":{"min":"0","max":"100","unit":"%"}}},
              {"identifier":"report_period","name":"Report period","accessMode":"rw","required":false,
               "dataType":{"type":"int","specs":{"min":"10","max":"3600","step":"10","unit":"s"}}}],
             "events":[
              {"identifier":"post","name":"post","type":"info","method":"thing.event.property.post","outputData":[]},
              {"identifier":"button","name":"Button","type":"info","method":"thing.event.button.post",
               "outputData":[{"identifier":"press","name":"Press",
                              "dataType":{"type":"enum","specs":{"1":"single","2":"double","3":"long"}}}]}],
             "services":[
              {"identifier":"set","name":"set","callType":"async","method":"thing.service.property.set",
               "inputData":[],"outputData":[]},
              {"identifier":"identify","name":"Identify","callType":"async","method":"thing.service.identify",
               "inputData":[{"identifier":"times","name":"Times","dataType":{"type":"int","specs":{"min":"1","max":"10"}}}],
               "outputData":[{"identifier":"blinked","name":"Blinked","dataType":{"type":"int","specs":{"min":"0","max":"10"}}}]}]}
            """,
    ]

    /// The built-in models, each replaced by the one in `directory` with the same productId.
    static func load(directory: String?) throws -> ThingModels {
        var models: [ThingModel] = []
        for (name, text) in files.sorted(by: { $0.key < $1.key }) {
            models.append(try ThingModels.parse(Array(text.utf8), file: "built-in \(name)"))
        }
        if let directory {
            models += try ThingModels(directory: directory).byProduct.values.sorted { $0.productId < $1.productId }
        }
        return ThingModels(models)
    }
}
