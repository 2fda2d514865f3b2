/// One topic of an Alink device, as a filter with `{pk}` and `{dn}` for the device's product key and name: what the
/// device publishes (the agent reads it) or what the platform, here the agent, publishes to it (the device reads
/// it). `+` stands for a level the device and the agent fill in (an event's or a service's identifier).
package struct AlinkTopic: Sendable, Equatable {
    package let template: String
    package let publisher: TopicPublisher
    /// Only a gateway speaks it: its sub-devices' topology and sessions.
    package let gatewayOnly: Bool

    /// The filter for one device (`{pk}`, `{dn}` filled in); `+` for either gives the filter for every device.
    package func filter(productKey: some StringProtocol, deviceName: some StringProtocol) -> String {
        template.replacing("{pk}", with: productKey).replacing("{dn}", with: deviceName)
    }
}

/// The topics of one Alink device, declared once (docs/protocol.md, "Alink"): the broker roles of provisioning
/// (`AccessPolicy`) and the simulator's subscriptions come from `AlinkTopics.all`, and tests check them against
/// what `AlinkDialect` reads and sends.
package enum AlinkTopics {
    package static let all: [AlinkTopic] = {
        let sys = "/sys/{pk}/{dn}/thing/"
        func device(_ template: String, gateway: Bool = false) -> AlinkTopic {
            AlinkTopic(template: template, publisher: .device, gatewayOnly: gateway)
        }
        func platform(_ template: String, gateway: Bool = false) -> AlinkTopic {
            AlinkTopic(template: template, publisher: .agent, gatewayOnly: gateway)
        }
        var topics = [
            // Property posts and every event's post (`property` is one level like an event's identifier).
            device(sys + "event/+/post"), platform(sys + "event/+/post_reply"),
            platform(sys + "service/property/set"), device(sys + "service/property/set_reply"),
            // A service's call (`{identifier}`) and its reply (`{identifier}_reply`) are one level each: a filter
            // cannot tell them apart.
            platform(sys + "service/+"), device(sys + "service/+"),
            device(sys + "deviceinfo/update"), platform(sys + "deviceinfo/update_reply"),
            device(sys + "deviceinfo/delete"), platform(sys + "deviceinfo/delete_reply"),
            device("/ota/device/inform/{pk}/{dn}"), device("/ota/device/progress/{pk}/{dn}"),
            platform("/ota/device/upgrade/{pk}/{dn}"),
            device("/ext/ntp/{pk}/{dn}/request"), platform("/ext/ntp/{pk}/{dn}/response"),
            device(sys + "topo/add", gateway: true), platform(sys + "topo/add_reply", gateway: true),
            device(sys + "topo/delete", gateway: true), platform(sys + "topo/delete_reply", gateway: true),
            device(sys + "topo/get", gateway: true), platform(sys + "topo/get_reply", gateway: true),
            // The firmware the device should run, answered from the catalog.
            device(sys + "ota/firmware/get"), platform(sys + "ota/firmware/get_reply"),
        ]
        for session in ["login", "logout", "batch_login", "batch_logout"] {
            topics.append(device("/ext/session/{pk}/{dn}/combine/\(session)", gateway: true))
            topics.append(platform("/ext/session/{pk}/{dn}/combine/\(session)_reply", gateway: true))
        }
        return topics
    }()

    /// The filters of `device` (`<pk>.<dn>`) published by `publisher`, a gateway's included when `gateway`; empty
    /// when the id is not of that form.
    package static func filters(of device: String, gateway: Bool, publisher: TopicPublisher) -> [String] {
        guard let (pk, dn) = AlinkDialect.split(device) else { return [] }
        return all.filter { $0.publisher == publisher && (gateway || !$0.gatewayOnly) }
            .map { $0.filter(productKey: pk, deviceName: dn) }
    }

    /// The same filter for every device: what the agent publishes to all of them, or reads from them.
    package static func everyDevice(_ publisher: TopicPublisher) -> [String] {
        all.filter { $0.publisher == publisher }.map { $0.filter(productKey: "+", deviceName: "+") }
    }
}

extension AlinkTopics {
    /// Linkkit's MQTT user name for `device` (`<pk>.<dn>`): `<dn>&<pk>`; nil for an id of another form.
    package static func username(_ device: String) -> String? {
        AlinkDialect.split(device).map { "\($0.deviceName)&\($0.productKey)" }
    }

    /// The client id a provisioned Alink device connects with, which its broker credentials are pinned to:
    /// Linkkit's `<pk>&<dn>|...|` in the form of credentials the platform issued (`securemode=-2`, a token, not a
    /// signature from the device's secret), given as is to the SDK with the user name and password.
    package static func clientID(_ device: String) -> String? {
        AlinkDialect.split(device).map { "\($0.productKey)&\($0.deviceName)|securemode=-2,authType=connwl|" }
    }
}
