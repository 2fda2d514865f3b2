import Foundation
import JSON
import Testing
import TestSupport
@testable import ThingAgent
@testable import ThingAgentCore

/// The TuyaLink dialect on its own (pure): which topics are its, what each carries, the answers the platform owes,
/// and the requests it sends. Against Tuya's own C SDK: `TuyaLinkTests`.
@Suite("TuyaLink dialect")
struct TuyaLinkDialectTests {
    let tuya = TuyaLinkDialect(products: ["dev1": "p-plug"])
    let arrival: Millis = 1_700_000_000_123

    func decode(_ topic: String, _ payload: String) throws -> (DialectRoute, InboundMessage, [OutboundMessage]) {
        let route = try #require(try tuya.route(topic))
        let bytes = Array(payload.utf8)
        let decoded = try bytes.withUnsafeBytes { try tuya.decode(route, payload: $0, arrival: arrival) }
        return (route, decoded.message, decoded.replies)
    }

    @Test func topicsAreItsOwnAndADeviceIdOutsideTheRuleIsInvalid() throws {
        #expect(try tuya.route("tylink/dev1/thing/property/report")?.device == "dev1")
        #expect(try tuya.route("tylink/dev1/thing/property/set") == nil, "its own request is not read back")
        #expect(try tuya.route("tylink/dev1/thing/property") == nil)
        #expect(try tuya.route("tylink/dev1/thing/property/report/x") == nil)
        #expect(try tuya.route("things/dev1/thing/property/report") == nil)
        #expect(throws: Topics.ParseError.invalidDeviceID) { try tuya.route("tylink/bad@id/thing/property/report") }
        #expect(throws: Topics.ParseError.invalidDeviceID) { try tuya.route("tylink//thing/property/report") }
        // Every topic a device publishes is subscribed, and only those.
        let subscribed = Set(tuya.subscriptions.map(\.filter))
        #expect(subscribed == Set(TuyaLinkDialect.Topic.allCases.map { "tylink/+/" + $0.suffix }))
        for topic in TuyaLinkDialect.Topic.allCases {
            #expect(try tuya.route("tylink/x/" + topic.suffix)?.detail == topic.rawValue, "\(topic)")
        }
    }

    @Test func aReportInSecondsIsCachedInMillisecondsAndAnsweredOnlyWhenItAsks() throws {
        let (route, message, replies) = try decode("tylink/dev1/thing/property/report",
            #"{"msgId":"0","time":1700000000,"data":{"switch_1":{"value":true,"time":1699999999},"power":12}}"#)
        #expect(route.device == "dev1")
        #expect(message == .properties([("switch_1", PropertyValue(value: true, time: 1_699_999_999_000)),
                                        ("power", PropertyValue(value: 12, time: 1_700_000_000_000))]))
        #expect(replies.isEmpty, "no sys.ack: no answer")
        let (_, _, asked) = try decode("tylink/dev1/thing/property/report",
                                       #"{"msgId":"5","time":1700000000,"data":{"power":1},"sys":{"ack":1}}"#)
        let reply = try #require(asked.first)
        #expect(reply.topic == "tylink/dev1/thing/property/report_response")
        let answer = try JSONParser.parse(reply.payload)
        #expect(answer["msgId"] == "5" && answer["code"] == 0)
        #expect(answer["time"] == .integer(arrival / 1000), "seconds: the SDK reads time as 32-bit seconds")
    }

    @Test func setAndActionGoOutWithTheAgentsMsgIdAndTheirResponsesEndThemWithOrWithoutACode() throws {
        let set = try #require(tuya.request(.setProperties, device: "dev1", msgId: "t1z", data: .object(["switch_1": true]),
                                            time: arrival))
        #expect(set.topic == "tylink/dev1/thing/property/set")
        let payload = try JSONParser.parse(set.payload)
        #expect(payload["msgId"] == "t1z" && payload["time"] == .integer(arrival / 1000))
        #expect(payload["data"]?["switch_1"] == true)
        let (_, answered, _) = try decode("tylink/dev1/thing/property/set_response", #"{"msgId":"t1z","time":1700000001}"#)
        #expect(answered == .response(Response(msgId: "t1z", code: 0, message: nil, data: nil, time: 1_700_000_001_000)),
                "the SDK cannot put a code in it: none is success")
        let (_, refused, _) = try decode("tylink/dev1/thing/property/set_response", #"{"msgId":"t1z","time":1,"code":1002}"#)
        guard case .response(let failed) = refused else { Issue.record("\(refused)"); return }
        #expect(failed.code == 1002)

        let action = try #require(tuya.request(.action, device: "dev1", msgId: "t20",
            data: .object(["actionCode": "identify", "inputParams": .object(["seconds": 3])]), time: arrival))
        #expect(action.topic == "tylink/dev1/thing/action/execute")
        let call = try JSONParser.parse(action.payload)
        #expect(call["data"]?["actionCode"] == "identify" && call["data"]?["inputParams"]?["seconds"] == 3)
        let (_, done, _) = try decode("tylink/dev1/thing/action/execute_response",
            #"{"msgId":"t20","time":1700000001,"data":{"actionCode":"identify","outputParams":{"blinked":3}}}"#)
        guard case .response(let response) = done else { Issue.record("\(done)"); return }
        #expect(response.code == 0 && response.data?["outputParams"]?["blinked"] == 3)
        #expect(tuya.request(.wifiScan, device: "dev1", msgId: "t1", data: nil, time: arrival) == nil)
    }

    @Test func anEventIsHeardAndAnsweredAndABatchReportCoversTheGatewayAndItsSubDevices() throws {
        let (_, event, replies) = try decode("tylink/dev1/thing/event/trigger",
            #"{"msgId":"3","time":1700000000,"data":{"eventCode":"fault","eventTime":1699999990,"outputParams":{"code":7}}}"#)
        #expect(event == .event(ThingEvent(name: "fault", params: .object(["code": 7]), time: 1_699_999_990_000)))
        #expect(replies.first?.topic == "tylink/dev1/thing/event/trigger_response")

        let (_, batch, batchReplies) = try decode("tylink/gw1/thing/data/batch_report", #"""
            {"msgId":"9","time":1700000000,"sys":{"ack":1},"data":{
              "properties":{"load":{"value":3,"time":1700000000}},
              "subDevices":[{"deviceId":"s1","properties":{"temp":{"value":215,"time":1700000000}},
                             "events":{"low_battery":{"eventTime":1700000000,"outputParams":{"level":5}}}}]}}
            """#)
        #expect(batch == .batch([
            DeviceMessage("gw1", .properties([("load", PropertyValue(value: 3, time: 1_700_000_000_000))])),
            DeviceMessage("s1", .properties([("temp", PropertyValue(value: 215, time: 1_700_000_000_000))])),
            DeviceMessage("s1", .event(ThingEvent(name: "low_battery", params: .object(["level": 5]),
                                                  time: 1_700_000_000_000))),
        ]))
        #expect(batchReplies.first?.topic == "tylink/gw1/thing/data/batch_report_response")
        #expect(throws: PayloadError.self) {
            try decode("tylink/gw1/thing/data/batch_report", #"{"msgId":"9","time":1,"data":{"subDevices":[{"deviceId":"a/b"}]}}"#)
        }
    }

    @Test func aBindGivesEachSubDeviceItsIdLoginsAndLogoutsSayItsPresence() throws {
        let (_, bound, replies) = try decode("tylink/gw1/device/sub/bind",
            #"{"msgId":"1","time":1700000000,"data":[{"productId":"p-th","nodeId":"n1","clientId":"c-0001"}]}"#)
        #expect(bound == .batch([DeviceMessage("c-0001", .info(JSONObject([
            ("gatewayId", "gw1"), ("dialect", "tuyalink"), ("productId", "p-th")]), time: arrival))]))
        let answer = try JSONParser.parse(try #require(replies.first).payload)
        #expect(replies.first?.topic == "tylink/gw1/device/sub/bind_response")
        #expect(answer["code"] == 0 && answer["data"]?[0]?["deviceId"] == "c-0001" && answer["data"]?[0]?["clientId"] == "c-0001")

        let (_, login, loginReplies) = try decode("tylink/gw1/device/sub/login", #"{"msgId":"2","time":1700000000,"data":["c-0001"]}"#)
        #expect(login == .batch([
            DeviceMessage("c-0001", .info(JSONObject([("gatewayId", "gw1"), ("dialect", "tuyalink")]), time: arrival)),
            DeviceMessage("c-0001", .status(online: true, time: arrival, via: .session)),
        ]))
        #expect(loginReplies.isEmpty, "Tuya has no login answer")
        let (_, logout, _) = try decode("tylink/gw1/device/sub/logout", #"{"msgId":"3","time":1700000000,"data":["c-0001"]}"#)
        #expect(logout == .batch([DeviceMessage("c-0001", .status(online: false, time: arrival, via: .session))]))
        #expect(throws: PayloadError.self) { try decode("tylink/gw1/device/sub/login", #"{"msgId":"2","time":1,"data":[]}"#) }
        #expect(throws: PayloadError.self) {
            try decode("tylink/gw1/device/sub/bind", #"{"msgId":"1","time":1,"data":[{"productId":"p","clientId":"a b"}]}"#)
        }
    }

    @Test func firmwareTimeModelAndDesiredQuestions() throws {
        let (_, firmware, _) = try decode("tylink/dev1/ota/firmware/report",
            #"{"msgId":"1","time":1700000000,"data":{"bizType":"INIT","otaChannel":[{"channel":9,"version":"0.9"},{"channel":0,"version":"1.1.6"}]}}"#)
        // At its arrival: the seconds of its time would lose to the information recorded when it was first heard.
        #expect(firmware == .info(JSONObject([("firmwareVersion", "1.1.6")]), time: arrival))
        let (_, progress, _) = try decode("tylink/dev1/ota/progress/report", #"{"msgId":"2","time":1700000000,"data":{"channel":0,"progress":40}}"#)
        guard case .otaProgress(let report) = progress else { Issue.record("\(progress)"); return }
        #expect(report.stage == .downloading && report.progress == 40)

        let (_, time, timeReplies) = try decode("tylink/dev1/ext/time/request",
            #"{"msgId":"4","time":1700000000,"data":{"bizType":"NTP","dst":1699999999999}}"#)
        #expect(time == .answeredOnly)
        let clock = try JSONParser.parse(try #require(timeReplies.first).payload)
        #expect(timeReplies.first?.topic == "tylink/dev1/ext/time/response")
        #expect(clock["data"]?["dst"] == 1_699_999_999_999 && clock["data"]?["srt"] == .integer(arrival))
        #expect((clock["data"]?["sst"]?.int64Value ?? 0) >= arrival)

        let (_, desired, desiredReplies) = try decode("tylink/dev1/thing/property/desired/get",
                                                      #"{"msgId":"5","time":1700000000,"data":["power"]}"#)
        #expect(desired == .answeredOnly)
        #expect(try JSONParser.parse(try #require(desiredReplies.first).payload)["data"]?["properties"] == .object([:]))

        let (_, model, _) = try decode("tylink/dev1/thing/model/get", #"{"msgId":"6","time":1700000000,"data":{"format":"simple"}}"#)
        #expect(model == .query(DeviceQuery(.thingModel, id: "6")))
        let plug = ThingModel(productId: "p-plug", properties: [
            PropertySpec(code: "switch_1", kind: .bool, access: .rw),
            PropertySpec(code: "power", kind: .value(min: 0, max: 5000, step: 1), access: .ro, unit: "W", scale: 1),
        ], actions: [ActionSpec(name: "identify", inputs: [], outputs: ["blinked"])], events: [])
        let answer = try #require(tuya.answer(DeviceQuery(.thingModel, id: "6"), device: "dev1", with: .thingModel(plug)))
        #expect(answer.topic == "tylink/dev1/thing/model/get_response")
        let sent = try JSONParser.parse(answer.payload)
        #expect(sent["msgId"] == "6" && sent["code"] == 0)
        let reread = try ThingModels.parse(try #require(sent["data"]).serializedBytes(), file: "p-plug.json")
        #expect(reread.properties == plug.properties, "the answer is Tuya's model format, read back the same")
        let missing = try JSONParser.parse(try #require(tuya.answer(DeviceQuery(.thingModel, id: "7"), device: "dev1",
                                                                   with: .thingModel(nil))).payload)
        #expect(missing["code"] == 404)
        let huge = ThingModel(productId: "big", properties: (0..<60).map {
            PropertySpec(code: "property_number_\($0)", kind: .value(min: 0, max: 100, step: 1), access: .rw)
        })
        let tooBig = try JSONParser.parse(try #require(tuya.answer(DeviceQuery(.thingModel, id: "8"), device: "dev1",
                                                                  with: .thingModel(huge))).payload)
        #expect(tooBig["code"] == 413, "the SDK drops a downlink over 2,048 bytes without a word")
        let many = (0..<100).map { (id: "sub-device-number-\($0)", productId: Optional("p-th")) }
        let listed = try #require(tuya.answer(DeviceQuery(.subDevices, id: "9"), device: "gw1", with: .subDevices(many)))
        let entries = try JSONParser.parse(listed.payload)["data"]?.arrayValue ?? []
        #expect(TuyaLinkDialect.fits(listed) && entries.count > 10 && entries.count < 100, "as many as fit: \(entries.count)")
    }

    /// The SDK's buffer holds the packet's remaining length (the topic's length, the topic, the payload), not the
    /// payload alone: an answer whose payload is under 2,048 bytes but whose packet is over is answered 413.
    @Test func aModelAnswerCountsItsTopicAgainstTheSDKsBuffer() throws {
        let topic = "tylink/dev1/thing/model/get_response"
        /// A model whose code-0 answer (msgId "9", a 10-digit time) has a payload of `target` bytes.
        func model(payloadBytes target: Int) throws -> ThingModel {
            func padded(_ count: Int, _ first: Int, _ second: Int) -> ThingModel {
                let codes = (0..<count).map { "pad_\($0)" }
                    + [String(repeating: "x", count: first), String(repeating: "y", count: second)]
                return ThingModel(productId: "p-pad", properties: codes.map {
                    PropertySpec(code: $0, kind: .string(maxlen: 255), access: .ro)
                })
            }
            func bytes(_ model: ThingModel) -> Int {
                #"{"msgId":"9","time":1700000000,"code":0,"data":}"#.utf8.count
                    + JSONValue.object(TuyaModel.json(model)).serializedBytes().count
            }
            for count in 0..<64 {
                let extra = target - bytes(padded(count, 1, 1))
                guard extra >= 0 else { break }
                if extra <= 126 {
                    let first = min(64, 1 + extra)
                    let model = padded(count, first, 1 + extra - (first - 1))
                    #expect(bytes(model) == target)
                    return model
                }
            }
            throw TestSupportError("no padded model of \(target) bytes")
        }
        let room = TuyaLinkDialect.maxDownlinkBytes - 2 - topic.utf8.count
        let fits = try #require(tuya.answer(DeviceQuery(.thingModel, id: "9"), device: "dev1",
                                            with: .thingModel(try model(payloadBytes: room))))
        #expect(fits.payload.count == room && TuyaLinkDialect.packetBytes(fits) == 2048)
        #expect(try JSONParser.parse(fits.payload)["code"] == 0, "a packet of exactly 2,048 bytes is taken")
        let over = try #require(tuya.answer(DeviceQuery(.thingModel, id: "9"), device: "dev1",
                                            with: .thingModel(try model(payloadBytes: room + 1))))
        let refused = try JSONParser.parse(over.payload)
        #expect(refused["code"] == 413 && refused["data"] == nil, "a payload of \(room + 1) bytes: \(refused)")
        #expect((refused["message"]?.stringValue ?? "").contains("2049 bytes with its topic"), "\(refused)")
        #expect(TuyaLinkDialect.fits(over))
    }

    @Test func productsIdentityAndWhichDialectARequestSpeaks() throws {
        #expect(tuya.identity(of: "dev1") == JSONObject([("dialect", "tuyalink"), ("productId", "p-plug")]))
        #expect(tuya.identity(of: "other") == JSONObject([("dialect", "tuyalink")]))
        #expect(tuya.device(forClient: "tuyalink_dev1", user: "dev1|signMethod=hmacSha256,timestamp=1") == "dev1")
        #expect(tuya.device(forClient: "a1PK&lamp|securemode=3|", user: nil) == nil)
        #expect(tuya.refusal(.setProperties, device: "x", productId: nil)?.contains("deviceProducts") == true)
        #expect(tuya.refusal(.action, device: "x", productId: "p") == nil)
        #expect(tuya.refusal(.otaStart, device: "x", productId: nil) == nil)

        let all = Dialects(names: ["native", "alink", "tuyalink"], topics: Topics(), products: ["dev1": "p-plug"])
        #expect(all.dialect(for: "dev1")?.name == "tuyalink", "registered before it was heard")
        #expect(all.dialect(for: "heard", known: "tuyalink")?.name == "tuyalink")
        #expect(all.dialect(for: "lamp1")?.name == "native")
        #expect(all.dialect(for: "a1PK.lamp1")?.name == "alink")
        #expect(Dialects(names: ["native"], topics: Topics()).dialect(for: "heard", known: "tuyalink") == nil)
    }

    @Test func badInputIsAPayloadErrorNeverACrash() throws {
        for (topic, payload) in [
            ("thing/property/report", "not json"), ("thing/property/report", #"{"msgId":"1","data":[1]}"#),
            ("thing/property/report", #"{"msgId":"1","time":"soon","data":{}}"#),
            ("thing/property/set_response", #"{"time":1}"#), ("thing/property/set_response", #"{"msgId":"1","code":"x"}"#),
            ("thing/event/trigger", #"{"msgId":"1","data":{"eventCode":"a b"}}"#),
            ("thing/data/batch_report", #"{"msgId":"1","data":{}}"#), ("device/sub/logout", #"{"msgId":"1","data":{}}"#),
            ("ota/firmware/report", #"{"msgId":"1","data":{"otaChannel":[]}}"#),
            ("ota/progress/report", #"{"msgId":"1","data":{"progress":101}}"#),
            ("thing/model/get", #"{"time":1}"#),
        ] {
            #expect(throws: PayloadError.self, "\(topic) \(payload)") { try decode("tylink/dev1/" + topic, payload) }
        }
    }
}

@Suite("Tuya model files")
struct TuyaModelTests {
    @Test func tuyasOwnModelJSONIsReadByTheLoaderBesideTheAgentsOwn() throws {
        let text = #"""
            {"modelId":"0000001","services":[{"code":"","properties":[
              {"abilityId":1,"code":"foodRemaining","accessMode":"ro","typeSpec":{"type":"value","min":0,"max":2000,"step":1,"unit":"g","scale":0}},
              {"abilityId":2,"code":"switch_1","accessMode":"rw","typeSpec":{"type":"bool"}},
              {"abilityId":3,"code":"mode","accessMode":"wr","typeSpec":{"type":"enum","range":["a","b"]}},
              {"abilityId":4,"code":"note","accessMode":"rw","typeSpec":{"type":"string","maxlen":20}},
              {"abilityId":5,"code":"when","accessMode":"rw","typeSpec":{"type":"date"}}],
             "events":[{"abilityId":101,"code":"feedEvent","outputParams":[{"code":"quantity","typeSpec":{"type":"value","min":0,"max":2000,"step":1,"scale":0}}]}],
             "actions":[{"abilityId":101,"code":"feed","inputParams":[{"code":"grams","typeSpec":{"type":"value","min":1,"max":50,"step":1}}]}]}]}
            """#
        let model = try ThingModels.parse(Array(text.utf8), file: "/models/feeder-1.json")
        #expect(model.productId == "feeder-1", "Tuya's model names no product: the file does")
        #expect(model.properties.map(\.code) == ["foodRemaining", "switch_1", "mode", "note"], "a date is left out")
        #expect(model.property("foodRemaining")?.access == .ro && model.property("mode")?.access == .wo)
        #expect(model.property("foodRemaining")?.unit == "g")
        #expect(model.actions?.first?.name == "feed" && model.actions?.first?.inputs.first?.code == "grams")
        #expect(model.events?.first?.name == "feedEvent")
        #expect(throws: ValidationError.self) { try model.validate(["foodRemaining": 3]) }
        #expect(throws: ValidationError.self) { try model.validateAction("feed", params: ["grams": 60]) }
        try model.validateAction("feed", params: ["grams": 10])

        let named = try ThingModels.parse(Array(#"{"productId":"p9","services":[{"properties":[]}]}"#.utf8), file: "x.json")
        #expect(named.productId == "p9")
        #expect(throws: ConfigError.self) {
            try ThingModels.parse(Array(#"{"services":[{"properties":[{"code":"a","typeSpec":{"type":"nope"}}]}]}"#.utf8),
                                  file: "x.json")
        }
    }
}

@Suite("TuyaLink topics and access")
struct TuyaLinkTopicsTests {
    @Test func theShippedACLsTuyaLinkLinesAreTheTable() throws {
        let users = try AlinkTopicsTests.shippedACLTopicLines()
        func topics(_ user: String, _ access: String) -> Set<String> {
            Set((users[user] ?? []).filter { $0.hasPrefix("topic \(access) tylink/") }
                .map { String($0.dropFirst("topic \(access) ".count)) })
        }
        let devices = Set(TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .device))
        #expect(topics("thing-agent", "read") == devices)
        #expect(topics("thing-agent", "write") == Set(TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .agent)))
        #expect(topics("thing-agent-cli", "read") == devices)
        #expect(topics("thing-agent-cli", "write") == ["tylink/+/thing/property/set", "tylink/+/thing/action/execute"])
    }

    /// With provisioning the broker's dynamic-security roles hold what the static ACL's lines do: the agent sends every
    /// request and answer and reads every device message, the operators' CLI reads the same and sends sets and actions.
    @Test func theDynamicSecurityRolesGiveTheAgentAndTheCLITheirTuyaLinkTopics() {
        let policy = AccessPolicy(topics: Topics(root: "things"), agentClientID: "thing-agent",
                                  eventsTopic: "thing-agent/events", replyPrefix: "thing-agent/replies/")
        func topics(_ role: Set<RoleACL>, _ type: String) -> Set<String> {
            Set(role.filter { $0.type == type && $0.topic.hasPrefix("tylink/") }.map(\.topic))
        }
        let devices = Set(TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .device))
        #expect(topics(policy.agentRole, "publishClientSend") == Set(TuyaLinkTopics.filters(of: "+", gateway: true,
                                                                                            publisher: .agent)))
        #expect(topics(policy.agentRole, "subscribePattern") == devices)
        #expect(topics(policy.cliRole, "publishClientSend") == ["tylink/+/thing/property/set", "tylink/+/thing/action/execute"])
        #expect(topics(policy.cliRole, "subscribePattern") == devices)
    }

    @Test func theTuyaLinkListenersACLIsTheTable() throws {
        let acl = try String(contentsOfFile: TestSupport.repositoryRoot() + "/deploy/mosquitto-tuyalink.acl", encoding: .utf8)
        let lines = acl.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        #expect(lines.allSatisfy { $0.hasPrefix("pattern ") }, "every client there has a user name: patterns only")
        func topics(_ access: String) -> Set<String> {
            Set(lines.filter { $0.hasPrefix("pattern \(access) ") }.map { String($0.dropFirst("pattern \(access) ".count)) })
        }
        #expect(topics("write") == Set(TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .device)))
        #expect(topics("read") == Set(TuyaLinkTopics.filters(of: "+", gateway: true, publisher: .agent)))
    }

    @Test func everyTopicTheAgentSendsIsOneADeviceReads() throws {
        let tuya = TuyaLinkDialect()
        let reads = Set(TuyaLinkTopics.filters(of: "d1", gateway: true, publisher: .agent))
        var sent: [OutboundMessage] = []
        sent.append(try #require(tuya.request(.setProperties, device: "d1", msgId: "t1", data: .object([:]), time: 0)))
        sent.append(try #require(tuya.request(.action, device: "d1", msgId: "t2",
                                              data: .object(["actionCode": "identify"]), time: 0)))
        sent.append(try #require(tuya.request(.otaStart, device: "d1", msgId: "t3",
            data: .object(["url": "https://x/fw.bin", "version": "2.0", "sha256": .string(String(repeating: "a", count: 64))]),
            time: 0)))
        for topic in TuyaLinkDialect.Topic.allCases {
            let payload = Array(#"{"msgId":"1","time":1,"sys":{"ack":1},"data":[{"productId":"p","clientId":"c1"}]}"#.utf8)
            let route = try #require(try tuya.route("tylink/d1/" + topic.suffix))
            if let decoded = try? payload.withUnsafeBytes({ try tuya.decode(route, payload: $0, arrival: 0) }) {
                sent += decoded.replies
            }
        }
        for query in [DeviceQuery(.thingModel, id: "1"), DeviceQuery(.subDevices, id: "2"), DeviceQuery(.firmware, id: "3")] {
            let known: QueryAnswer = switch query.kind {
            case .thingModel: .thingModel(nil)
            case .subDevices: .subDevices([])
            case .firmware: .firmware(nil)
            }
            sent.append(try #require(tuya.answer(query, device: "d1", with: known)))
        }
        for message in sent {
            #expect(reads.contains(message.topic), "\(message.topic)")
            #expect(TuyaLinkDialect.fits(message), "\(message.topic): \(TuyaLinkDialect.packetBytes(message)) bytes")
            #expect((try? JSONParser.parse(message.payload)) != nil, "the SDK crashes on a payload that is not JSON")
        }
    }
}
