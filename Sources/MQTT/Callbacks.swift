internal import CMosquitto

/// The C callbacks. Each finds its `ClientCore` through the `obj` pointer given to `mosquitto_new` and hands over
/// copies of the data: libmosquitto frees topic, payload and properties when the callback returns.
enum Callbacks {
    static func install(on pointer: OpaquePointer) {
        mosquitto_connect_v5_callback_set(pointer) { _, obj, code, flags, _ in
            ClientCore.from(obj)?.didReceiveConnack(code: code, sessionPresent: flags & 1 != 0)
        }
        mosquitto_publish_v5_callback_set(pointer) { _, obj, mid, reason, _ in
            ClientCore.from(obj)?.didCompletePublish(mid: mid, reasonCode: reason)
        }
        mosquitto_subscribe_v5_callback_set(pointer) { _, obj, mid, count, granted, _ in
            let codes = (0..<Int(max(count, 0))).map { granted?[$0] ?? 0x80 }
            ClientCore.from(obj)?.didSubscribe(mid: mid, grantedCodes: codes)
        }
        mosquitto_unsubscribe_v5_callback_set(pointer) { _, obj, mid, _ in
            ClientCore.from(obj)?.didUnsubscribe(mid: mid)
        }
        mosquitto_message_v5_callback_set(pointer) { _, obj, message, properties in
            guard let core = ClientCore.from(obj), let raw = message?.pointee else { return }
            let payload: [UInt8] =
                if let bytes = raw.payload, raw.payloadlen > 0 {
                    Array(UnsafeRawBufferPointer(start: bytes, count: Int(raw.payloadlen)))
                } else {
                    []
                }
            core.didReceive(
                MQTTMessage(
                    topic: raw.topic.map { String(cString: $0) } ?? "",
                    payload: payload,
                    qos: QoS(rawValue: Int(raw.qos)) ?? .atMostOnce,
                    retain: raw.retain,
                    responseTopic: ReceivedProperties.string(properties, MQTT_PROP_RESPONSE_TOPIC),
                    correlationData: ReceivedProperties.binary(properties, MQTT_PROP_CORRELATION_DATA)))
        }
    }
}
