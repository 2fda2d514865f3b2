internal import CLazyLibraries

/// The C callbacks. Each finds its `ClientCore` through the `obj` pointer given to `mosquitto_new` and hands over
/// copies of the data: libmosquitto frees topic, payload and properties when the callback returns.
enum Callbacks {
    static func install(on pointer: OpaquePointer) {
        libmosquitto.mosquitto_connect_v5_callback_set(pointer) { mosq, obj, code, flags, properties in
            guard let core = ClientCore.from(obj) else { return }
            // Queued here, inside the CONNACK's handling, it goes out before the messages libmosquitto resends
            // once the callback returns, and before anything the client's users can send.
            if code == 0, let birth = core.configuration.birth, let mosq {
                let payload = birth.payload()
                _ = payload.withUnsafeBytes { bytes in
                    libmosquitto.mosquitto_publish(mosq, nil, birth.topic, Int32(bytes.count), bytes.baseAddress,
                                      Int32(birth.qos.rawValue), birth.retain)
                }
            }
            core.didReceiveConnack(
                code: code, sessionPresent: flags & 1 != 0,
                maximumPacketSize: ReceivedProperties.int32(properties, MQTT_PROP_MAXIMUM_PACKET_SIZE))
        }
        libmosquitto.mosquitto_disconnect_v5_callback_set(pointer) { _, obj, reason, _ in
            ClientCore.from(obj)?.didDisconnect(reason: reason)
        }
        libmosquitto.mosquitto_publish_v5_callback_set(pointer) { _, obj, mid, reason, _ in
            ClientCore.from(obj)?.didCompletePublish(mid: mid, reasonCode: reason)
        }
        libmosquitto.mosquitto_subscribe_v5_callback_set(pointer) { _, obj, mid, count, granted, _ in
            let codes = (0..<Int(max(count, 0))).map { granted?[$0] ?? 0x80 }
            ClientCore.from(obj)?.didSubscribe(mid: mid, grantedCodes: codes)
        }
        libmosquitto.mosquitto_unsubscribe_v5_callback_set(pointer) { _, obj, mid, _ in
            ClientCore.from(obj)?.didUnsubscribe(mid: mid)
        }
        libmosquitto.mosquitto_message_v5_callback_set(pointer) { _, obj, message, properties in
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

    /// libmosquitto's error lines are kept while a connection is being made (they explain a failed attempt,
    /// `TLSDiagnosis`), and not listened to once connected: with a log callback set, the library formats a debug
    /// line for every packet it sends or receives (a `malloc` and a `vsnprintf` each), only for it to be dropped.
    static func listenToLog(_ pointer: OpaquePointer, _ listening: Bool) {
        guard listening else {
            libmosquitto.mosquitto_log_callback_set(pointer, nil)
            return
        }
        libmosquitto.mosquitto_log_callback_set(pointer) { _, obj, level, text in
            guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
            ClientCore.from(obj)?.didLog(String(cString: text))
        }
    }
}
