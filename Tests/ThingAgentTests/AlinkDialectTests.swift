import JSON
import Testing
@testable import ThingAgentCore

/// The Alink dialect on its own (pure): which topics are its, what each carries, the replies the platform owes,
/// and the requests it sends. Against Linkkit itself: `LinkkitTests`.
@Suite("Alink dialect")
struct AlinkDialectTests {
    let alink = AlinkDialect()
    let arrival: Millis = 1_700_000_000_000

    func decode(_ topic: String, _ payload: String) throws -> (DialectRoute, InboundMessage, [OutboundMessage]) {
        let route = try #require(try alink.route(topic))
        let bytes = Array(payload.utf8)
        let decoded = try bytes.withUnsafeBytes { try alink.decode(route, payload: $0, arrival: arrival) }
        return (route, decoded.message, decoded.replies)
    }

    @Test func aPropertyPostIsTheDevicesPropertiesAndIsAnsweredWithEveryFieldTheSDKChecks() throws {
        let (route, message, replies) = try decode("/sys/a1PK/lamp1/thing/event/property/post",
            #"{"id":"7","version":"1.0","params":{"bright":40,"temp":{"value":21.5,"time":1600000000000}},"method":"thing.event.property.post"}"#)
        #expect(route.device == "a1PK.lamp1")
        #expect(message == .properties([("bright", PropertyValue(value: 40, time: arrival)),
                                        ("temp", PropertyValue(value: 21.5, time: 1_600_000_000_000))]))
        let reply = try #require(replies.first)
        #expect(reply.topic == "/sys/a1PK/lamp1/thing/event/property/post_reply")
        let answer = try JSONParser.parse(reply.payload)
        #expect(answer["id"] == "7" && answer["code"] == 200 && answer["message"] == "success")
        #expect(answer["data"]?.objectValue != nil)
    }

    @Test func aSetGoesOutWithADecimalIdAndItsReplyEndsTheAgentsRequest() throws {
        let request = try #require(alink.request(.setProperties, device: "a1PK.lamp1", msgId: "t1z",
                                                 data: .object(["bright": 70]), time: arrival))
        #expect(request.topic == "/sys/a1PK/lamp1/thing/service/property/set")
        let payload = try JSONParser.parse(request.payload)
        #expect(payload["id"] == "71" && payload["method"] == "thing.service.property.set")
        #expect(payload["params"]?["bright"] == 70)
        let (_, message, replies) = try decode("/sys/a1PK/lamp1/thing/service/property/set_reply",
                                               #"{"id":"71","code":200,"data":{}}"#)
        guard case .response(let response) = message else { Issue.record("\(message)"); return }
        #expect(response.msgId == "t1z" && response.code == 0, "200 is success")
        #expect(replies.isEmpty)
        let (_, refused, _) = try decode("/sys/a1PK/lamp1/thing/service/property/set_reply",
                                         #"{"id":"71","code":460,"message":"bad","data":{}}"#)
        guard case .response(let failed) = refused else { Issue.record("\(refused)"); return }
        #expect(failed.code == 460 && failed.message == "bad")
        #expect(alink.request(.wifiScan, device: "a1PK.lamp1", msgId: "t1", data: nil, time: arrival) == nil)
    }

    @Test func tagsFirmwareAndNTP() throws {
        let (_, tags, tagReply) = try decode("/sys/a1PK/lamp1/thing/deviceinfo/update",
            #"{"id":"3","version":"1.0","params":[{"attrKey":"room","attrValue":"lab"}],"method":"thing.deviceinfo.update"}"#)
        #expect(tags == .tags(update: [("room", "lab")], delete: [], time: arrival))
        #expect(tagReply.first?.topic == "/sys/a1PK/lamp1/thing/deviceinfo/update_reply")
        let (_, removed, removeReply) = try decode("/sys/a1PK/lamp1/thing/deviceinfo/delete",
            #"{"id":"4","version":"1.0","params":[{"attrKey":"room"}],"method":"thing.deviceinfo.delete"}"#)
        #expect(removed == .tags(update: [], delete: ["room"], time: arrival))
        #expect(removeReply.first?.topic == "/sys/a1PK/lamp1/thing/deviceinfo/delete_reply")
        #expect(throws: PayloadError.self) {
            try decode("/sys/a1PK/lamp1/thing/deviceinfo/update", #"{"id":"5","params":[{"attrKey":"room"}]}"#)
        }
        let (_, version, _) = try decode("/ota/device/inform/a1PK/lamp1", #"{"id":1,"params":{"version":"1.2.0"}}"#)
        #expect(version == .info(["firmwareVersion": "1.2.0"], time: arrival))
        let (_, ntp, ntpReply) = try decode("/ext/ntp/a1PK/lamp1/request", #"{"deviceSendTime":"1699999999000"}"#)
        #expect(ntp == .answeredOnly)
        let answer = try JSONParser.parse(try #require(ntpReply.first).payload)
        #expect(answer["deviceSendTime"] == "1699999999000" && answer["serverRecvTime"]?.stringValue == String(arrival))
    }

    @Test func aGatewaysTopologyAndSessionsSpeakForItsSubDevices() throws {
        let (route, added, addReply) = try decode("/sys/a1GW/gw1/thing/topo/add",
            #"{"id":"1","version":"1.0","params":[{"productKey":"a1SUB","deviceName":"sub1","sign":"x"}]}"#)
        #expect(route.device == "a1GW.gw1")
        #expect(added == .batch([DeviceMessage("a1SUB.sub1", .info(["gatewayId": "a1GW.gw1", "productId": "a1SUB"],
                                                                   time: arrival))]))
        let reply = try JSONParser.parse(try #require(addReply.first).payload)
        #expect(reply["data"]?[0]?["deviceName"] == "sub1" && reply["message"] == "success")
        let (_, login, loginReply) = try decode("/ext/session/a1GW/gw1/combine/batch_login",
            #"{"id":"2","params":{"signMethod":"hmacSha256","deviceList":[{"productKey":"a1SUB","deviceName":"sub1"}]}}"#)
        #expect(login == .batch([DeviceMessage("a1SUB.sub1", .info(["gatewayId": "a1GW.gw1", "productId": "a1SUB"],
                                                                   time: arrival)),
                                 DeviceMessage("a1SUB.sub1", .status(online: true, time: arrival, via: .session))]))
        #expect(loginReply.first?.topic == "/ext/session/a1GW/gw1/combine/batch_login_reply")
        let (_, logout, _) = try decode("/ext/session/a1GW/gw1/combine/batch_logout",
                                        #"{"id":"3","params":[{"productKey":"a1SUB","deviceName":"sub1"}]}"#)
        #expect(logout == .batch([DeviceMessage("a1SUB.sub1", .status(online: false, time: arrival, via: .session))]))
        #expect(throws: PayloadError.self) { try decode("/sys/a1GW/gw1/thing/topo/add", #"{"id":"4","params":[]}"#) }
    }

    @Test func theBrokersClientEventsNameTheDeviceByItsLinkkitClientIdOrUser() throws {
        let connected = try #require(BrokerLog.event(
            "1796171600: New client connected from 127.0.0.1:40110 as a1PK&lamp1|securemode=3,signmethod=hmacsha1| (p2, c1, k60, u'lamp1&a1PK')."))
        #expect(connected.client == "a1PK&lamp1|securemode=3,signmethod=hmacsha1|" && connected.user == "lamp1&a1PK")
        #expect(connected.connected)
        #expect(alink.device(forClient: connected.client, user: connected.user) == "a1PK.lamp1")
        #expect(alink.device(forClient: connected.client, user: nil) == "a1PK.lamp1")
        #expect(alink.device(forClient: "lamp1&a1PK", user: nil) == "a1PK.lamp1", "use_username_as_clientid")
        #expect(alink.device(forClient: "dev9", user: nil) == nil)
        for line in ["1: Client lamp1&a1PK disconnected.", "1: Client lamp1&a1PK closed its connection.",
                     "1: Client lamp1&a1PK has exceeded timeout, disconnecting.",
                     "1: Socket error on client lamp1&a1PK, disconnecting.",
                     "1: Client lamp1&a1PK disconnected due to protocol error."] {
            let left = try #require(BrokerLog.event(line), "\(line)")
            #expect(left.client == "lamp1&a1PK" && !left.connected, "\(line)")
        }
        #expect(BrokerLog.event("1: New connection from 127.0.0.1:40110 on port 1883.") == nil)
        let log = BrokerLog(dialects: [alink])
        let route = try #require(try log.route(BrokerLog.topic))
        let bytes = Array("1: Client lamp1&a1PK disconnected.".utf8)
        let message = try bytes.withUnsafeBytes { try log.decode(route, payload: $0, arrival: arrival) }.message
        #expect(message == .batch([DeviceMessage("a1PK.lamp1", .status(online: false, time: arrival, via: .broker))]))
        // A connection also says what the id does (the product key), for a device first heard of there.
        let joined = Array("1: New client connected from 127.0.0.1:1 as a1PK&lamp1|x| (p2, c1, k60, u'lamp1&a1PK').".utf8)
        let first = try joined.withUnsafeBytes { try log.decode(route, payload: $0, arrival: arrival) }.message
        #expect(first == .batch([DeviceMessage("a1PK.lamp1", .info(["productId": "a1PK"], time: arrival)),
                                 DeviceMessage("a1PK.lamp1", .status(online: true, time: arrival, via: .broker))]))
        #expect(Dialects(names: ["native"], topics: Topics()).subscriptions.allSatisfy { $0.filter != BrokerLog.topic },
                "only with a dialect whose devices announce nothing")
    }

    @Test func anUpgradeIsPushedUnansweredAndItsProgressIsTheRunningUpgrades() throws {
        let image: JSONValue = .object(["version": "1.3.0", "url": "http://fw/1.bin", "sha256": "ABCD", "size": 4096])
        let push = try #require(alink.request(.otaStart, device: "a1PK.lamp1", msgId: "t9", data: image, time: arrival))
        #expect(push.topic == "/ota/device/upgrade/a1PK/lamp1" && !push.answered)
        let payload = try JSONParser.parse(push.payload)
        #expect(payload["data"]?["signMethod"] == "SHA256" && payload["data"]?["sign"] == "abcd")
        #expect(payload["data"]?["size"] == 4096 && payload["code"] == "1000" && payload["id"] == 9)
        let noSize: JSONValue = .object(["version": "1.3.0", "url": "http://fw/1.bin", "sha256": "ab"])
        #expect(alink.request(.otaStart, device: "a1PK.lamp1", msgId: "t9", data: noSize, time: arrival) == nil,
                "Linkkit ignores a push without a size")
        let (_, downloading, _) = try decode("/ota/device/progress/a1PK/lamp1", #"{"id":"1","params":{"step":"40","desc":""}}"#)
        #expect(downloading == .otaProgress(OTAProgressReport(version: "", stage: .downloading, progress: 40,
                                                              failedCode: "", time: arrival)))
        let (_, verify, _) = try decode("/ota/device/progress/a1PK/lamp1", #"{"id":"1","params":{"step":"-3"}}"#)
        #expect(verify == .otaProgress(OTAProgressReport(version: "", stage: .failed, progress: 0,
                                                         failedCode: "verify", time: arrival)))
        #expect(throws: PayloadError.self) {
            try decode("/ota/device/progress/a1PK/lamp1", #"{"id":"1","params":{"step":"-9"}}"#)
        }
    }

    @Test func anActionIsAServiceCallAndItsReplyCarriesTheOutput() throws {
        let data: JSONValue = .object(["actionCode": "reboot", "inputParams": ["delay": 1]])
        let call = try #require(alink.request(.action, device: "a1PK.lamp1", msgId: "t2s", data: data, time: arrival))
        #expect(call.topic == "/sys/a1PK/lamp1/thing/service/reboot" && call.answered)
        let payload = try JSONParser.parse(call.payload)
        #expect(payload["method"] == "thing.service.reboot" && payload["params"]?["delay"] == 1 && payload["id"] == "100")
        let (_, reply, _) = try decode("/sys/a1PK/lamp1/thing/service/reboot_reply",
                                       #"{"id":"100","code":200,"data":{"ok":true}}"#)
        guard case .response(let response) = reply else { Issue.record("\(reply)"); return }
        #expect(response.msgId == "t2s" && response.code == 0 && response.data?["outputParams"]?["ok"] == true)
        let (_, echo, echoReplies) = try decode("/sys/a1PK/lamp1/thing/service/reboot", String(decoding: call.payload, as: UTF8.self))
        #expect(echo == .answeredOnly && echoReplies.isEmpty, "its own call heard back")
        let bad: JSONValue = .object(["actionCode": "property", "inputParams": [:]])
        #expect(alink.request(.action, device: "a1PK.lamp1", msgId: "t2", data: bad, time: arrival) == nil)
    }

    @Test func otherTopicsAreNotItsAndBadIdsAndPayloadsAreRefused() throws {
        #expect(try alink.route("things/d1/thing/properties") == nil)
        #expect(try alink.route("/sys/a1PK/lamp1/thing/service/property/set") == nil, "its own request")
        #expect(try alink.route("/sys/a1PK/lamp1/other") == nil)
        #expect(throws: Topics.ParseError.invalidDeviceID) { try alink.route("/sys/a1PK/user@home/thing/event/property/post") }
        #expect(throws: Topics.ParseError.invalidDeviceID) { try alink.route("/sys/a.PK/lamp/thing/event/property/post") }
        #expect(throws: PayloadError.self) {
            try decode("/sys/a1PK/lamp1/thing/event/property/post", "NaN")
        }
        #expect(throws: PayloadError.self) {
            try decode("/sys/a1PK/lamp1/thing/service/property/set_reply", #"{"id":"x1","code":200,"data":{}}"#)
        }
    }

    @Test func idsRoundTripAndAnAlinkIdIsAddressedOnlyByItsForm() {
        for msgId in ["t1", "tzzzzzz", "t" + String(UInt64(1) << 40, radix: 36)] {
            #expect(AlinkDialect.wireID(msgId).flatMap(AlinkDialect.msgId) == msgId)
        }
        #expect(AlinkDialect.wireID("x1") == nil)
        #expect(alink.addresses("a1PK.lamp1") && !alink.addresses("lamp1") && !alink.addresses(".lamp"))
        let both = Dialects(names: ["native", "alink"], topics: Topics())
        #expect(both.dialect(for: "a1PK.lamp1")?.name == "alink")
        #expect(both.dialect(for: "lamp1")?.name == "native")
        #expect(both.dialect(for: "my.lamp", productId: "p-light-1")?.name == "native", "its product says native")
        #expect(both.dialect(for: "a1PK.lamp1", productId: "a1PK")?.name == "alink")
        #expect(Dialects(names: ["alink"], topics: Topics()).dialect(for: "lamp1") == nil)
    }

    @Test func anEventIsItsIdentifierAndValueAndIsAnswered() throws {
        let (route, event, replies) = try decode("/sys/a1PK/lamp1/thing/event/alarm/post",
            #"{"id":"8","version":"1.0","params":{"value":{"level":2}},"method":"thing.event.alarm.post"}"#)
        #expect(route.kind == .event)
        #expect(event == .event(ThingEvent(name: "alarm", params: .object(["level": 2]), time: arrival)))
        #expect(replies.first?.topic == "/sys/a1PK/lamp1/thing/event/alarm/post_reply")
        #expect(try JSONParser.parse(try #require(replies.first).payload)["id"] == "8")
        #expect(throws: PayloadError.self) {
            try decode("/sys/a1PK/lamp1/thing/event/alarm/post", #"{"id":"9","params":{"value":[1]}}"#)
        }
    }

    @Test func firmwareAndTopologyQueriesAreAnsweredFromWhatTheAgentKnows() throws {
        let (_, firmware, none) = try decode("/sys/a1PK/lamp1/thing/ota/firmware/get", #"{"id": 12, "params": {}}"#)
        #expect(firmware == .query(DeviceQuery(.firmware, id: 12)) && none.isEmpty, "answered by the agent")
        let image = FirmwareCatalog.Image(version: "1.3.0", url: "http://h/fw.bin", sha256: "AB12", size: 4096)
        let offer = try #require(alink.answer(DeviceQuery(.firmware, id: 12), device: "a1PK.lamp1",
                                              with: .firmware(image)))
        #expect(offer.topic == "/sys/a1PK/lamp1/thing/ota/firmware/get_reply")
        let data = try JSONParser.parse(offer.payload)
        #expect(data["id"] == 12 && data["code"] == 200 && data["data"]?["version"] == "1.3.0")
        #expect(data["data"]?["sign"] == "ab12" && data["data"]?["signMethod"] == "SHA256" && data["data"]?["size"] == 4096)
        let nothing = try #require(alink.answer(DeviceQuery(.firmware, id: 13), device: "a1PK.lamp1", with: .firmware(nil)))
        #expect(try JSONParser.parse(nothing.payload)["data"] == .object([:]), "no newer image: empty data")

        let (_, topo, _) = try decode("/sys/a1GW/gw1/thing/topo/get", #"{"id":"14","params":{}}"#)
        #expect(topo == .query(DeviceQuery(.subDevices, id: "14")))
        let list = try #require(alink.answer(DeviceQuery(.subDevices, id: "14"), device: "a1GW.gw1",
                                             with: .subDevices([("a1SUB.sub1", "a1SUB"), ("native-sub", nil)])))
        #expect(list.topic == "/sys/a1GW/gw1/thing/topo/get_reply")
        let sub = try JSONParser.parse(list.payload)["data"]
        #expect(sub == .array([.object(["productKey": "a1SUB", "deviceName": "sub1"])]), "only Alink sub-devices")
    }
}
