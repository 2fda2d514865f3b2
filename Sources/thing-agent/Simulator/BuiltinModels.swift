import ThingAgent

/// The thing models of the simulated products, so that `thing-agent simulate` works without a models directory.
/// `Config/models` holds the same files for the agent (SimulatorPlanTests checks they agree); `--models DIR`
/// replaces these by productId. Every simulated device answers the action `identify`.
enum BuiltinModels {
    static let light = "p-light-1"
    static let gateway = "p-gateway-1"
    static let sensor = "p-sensor-1"

    static let files: [String: String] = [
        light: """
            {"productId":"p-light-1","properties":[
              {"code":"switch_1","type":"bool","access":"rw"},
              {"code":"bright_value","type":"value","min":10,"max":1000,"step":1,"access":"rw"},
              {"code":"mode","type":"enum","range":["white","colour","scene"],"access":"rw"},
              {"code":"temp_current","type":"value","min":-200,"max":1000,"access":"ro"},
              {"code":"label","type":"string","maxlen":32,"access":"rw"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}]}
            """,
        gateway: """
            {"productId":"p-gateway-1","properties":[
              {"code":"permit_join","type":"value","min":0,"max":254,"step":1,"access":"wo"},
              {"code":"alarm_volume","type":"enum","range":["mute","low","middle","high"],"access":"rw"},
              {"code":"led_switch","type":"bool","access":"rw"},
              {"code":"gateway_name","type":"string","maxlen":64,"access":"rw"},
              {"code":"zigbee_channel","type":"value","min":11,"max":26,"access":"ro"},
              {"code":"sub_device_count","type":"value","min":0,"max":128,"access":"ro"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}]}
            """,
        sensor: """
            {"productId":"p-sensor-1","properties":[
              {"code":"temp_current","type":"value","min":-400,"max":800,"access":"ro"},
              {"code":"humidity_value","type":"value","min":0,"max":100,"access":"ro"},
              {"code":"battery_percentage","type":"value","min":0,"max":100,"access":"ro"},
              {"code":"report_period","type":"value","min":10,"max":3600,"step":10,"access":"rw"}],
             "actions":[
              {"code":"identify","inputParams":[{"code":"times","type":"value","min":1,"max":20}],
               "outputParams":[{"code":"blinked","type":"value","min":0,"max":20}]}]}
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
